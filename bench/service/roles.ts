/** The servers the service benchmark measures, each run in its own process: morsel itself and its baselines. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { type FacilitatorClient, x402HTTPResourceServer, x402ResourceServer } from "@x402/core/server"
import type { SupportedResponse } from "@x402/core/types"
import { ExactEvmScheme } from "@x402/evm/exact/server"
import { Effect, Layer } from "effect"
import sharp from "sharp"
import { Funding } from "../../src/analysis/Funding.ts"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { type ModelItem, VisionModel } from "../../src/analysis/VisionModel.ts"
import { prepareImage } from "../../src/analysis/VisionModelLive.ts"
import { AppConfigLive } from "../../src/config.ts"
import * as Database from "../../src/db/Database.ts"
import { storeFoods } from "../../src/foods/commonFoods.ts"
import { makeFoodDbLive } from "../../src/foods/FoodDbLive.ts"
import { countFoods } from "../../src/foods/repository.ts"
import { buildIndex } from "../../src/foods/matcher.ts"
import type { FoodRecord } from "../../src/foods/records.ts"
import { readDatasets } from "../../src/foods/sources.ts"
import { nodeServer } from "../../src/http/nodeServer.ts"
import { LimitsLive } from "../../src/limits/Limits.ts"
import { LoggingLive } from "../../src/logging.ts"
import { serveWith } from "../../src/server.ts"
import { NETWORK } from "../../src/x402/protocol.ts"
import { X402Funding } from "../../src/x402/X402Funding.ts"
import type { Call } from "./load.ts"
import { breakdown } from "./memory.ts"
import { DEV_FOODS } from "../../test/foods/devset.ts"
import { FDC_FIXTURE_DIR, hasSr28, SR28_DIR } from "../../test/foods/paths.ts"

export const PAY_TO = "0x1111111111111111111111111111111111111111"
/** The Bearer key of the in-memory credits the benchmark spends. */
export const BENCH_KEY = "Bearer memory_bench"

/** The environment of the morsel role: its own data folder, limits out of the way, x402 on an unreachable chain. */
export const morselEnv = (dataDir: string): Record<string, string> => ({
  HOST: "127.0.0.1",
  LOG_LEVEL: "warning",
  MORSEL_DATA_DIR: dataDir,
  X402_PAY_TO: PAY_TO,
  X402_SETTLER_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  X402_RPC_URL: "http://127.0.0.1:9",
  ...Object.fromEntries(
    ["GLOBAL_PER_DAY", "GLOBAL_PER_HOUR", "PAYER_PER_DAY", "CONCURRENT", "X402_PER_DAY", "X402_PER_HOUR", "X402_CONCURRENT"].map((name) => [
      `LIMIT_${name}`,
      "1000000"
    ])
  )
})

/** POST /v1/analyze paid with the benchmark's credits. */
export const analyzeCall = (image: Buffer, key: string, language: "en" | "lt" = "en"): Call => ({
  method: "POST",
  path: "/v1/analyze",
  headers: { authorization: BENCH_KEY, "idempotency-key": key },
  body: Buffer.from(JSON.stringify({ image_base64: image.toString("base64"), mime_type: "image/jpeg", language }))
})

/** Tells the parent where the server listens, on one stdout line. */
const announce = (port: number) => process.stdout.write(`READY ${port}\n`)

const readBody = (request: IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks)))
    request.on("error", reject)
  })

const listen = (handler: (request: IncomingMessage, response: ServerResponse) => Promise<void>) => {
  const server = createServer((request, response) => {
    handler(request, response).catch((error: unknown) => {
      response.writeHead(500).end(String(error))
    })
  })
  server.listen(0, "127.0.0.1", () => announce((server.address() as AddressInfo).port))
}

/**
 * The x402 reference seller: `@x402/express`'s middleware is not installed, so this is the same core it wraps
 * (`x402HTTPResourceServer.processHTTPRequest`) behind `node:http`, answering what the middleware answers.
 */
export const reference = async () => {
  const supported: SupportedResponse = { kinds: [{ x402Version: 2, scheme: "exact", network: NETWORK }], extensions: [], signers: {} }
  const facilitator: FacilitatorClient = {
    getSupported: async () => supported,
    verify: async () => ({ isValid: false, invalidReason: "unused" }),
    settle: async () => ({ success: false, errorReason: "unused", transaction: "", network: NETWORK })
  }
  const core = new x402ResourceServer(facilitator).register(NETWORK, new ExactEvmScheme())
  const http = new x402HTTPResourceServer(core, {
    "POST /v1/analyze": {
      accepts: { scheme: "exact", price: "$0.01", network: NETWORK, payTo: PAY_TO, maxTimeoutSeconds: 600 },
      description: "One food-photo nutrition analysis; paid only when the analysis succeeds",
      mimeType: "application/json"
    }
  })
  await http.initialize()
  listen(async (request, response) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1")
    const header = (name: string) => {
      const value = request.headers[name.toLowerCase()]
      return Array.isArray(value) ? value[0] : value
    }
    const adapter = {
      getHeader: header,
      getMethod: () => request.method ?? "GET",
      getPath: () => url.pathname,
      getUrl: () => url.href,
      getAcceptHeader: () => header("accept") ?? "",
      getUserAgent: () => header("user-agent") ?? ""
    }
    const paymentHeader = header("payment-signature")
    const result = await http.processHTTPRequest({
      adapter,
      path: url.pathname,
      method: adapter.getMethod(),
      ...(paymentHeader ? { paymentHeader } : {})
    })
    await readBody(request)
    if (result.type === "payment-error") {
      const { body, headers, status } = result.response
      response.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body ?? {}))
    } else {
      response.writeHead(200).end("{}")
    }
  })
}

const guess = { kcal: 150, protein_g: 5, carbs_g: 20, fat_g: 5 }

/** A model answer with `count` components named as the model names them. */
const answerWith = (count: number): ReadonlyArray<ModelItem> =>
  DEV_FOODS.slice(0, count).map((food) => ({ name: food.query, query: food.query, estimated_grams: 120, confidence: 0.8, per_100g: guess }))

/**
 * A vision model with no latency that still prepares the photo as the real one does (downscale, re-encode,
 * base64 for the request). English asks for one component, Lithuanian for twenty: the matcher's cost per item.
 */
const ZeroLatencyModel = Layer.succeed(VisionModel, {
  model: "bench-zero-latency",
  analyze: (input) =>
    Effect.map(prepareImage(input), (prepared) => {
      Buffer.from(prepared.bytes).toString("base64")
      return { food_detected: true, dish_name: "bench plate", items: answerWith(input.language === "en" ? 1 : 20) }
    })
})

/** Credits from memory for a Bearer key; the x402 challenge from the real x402 feature. */
const BenchFunding = Layer.effect(
  Funding,
  Effect.gen(function* () {
    const memory = yield* Funding
    const x402 = yield* X402Funding
    return Funding.of({ ...memory, challenge: x402.challenge })
  })
).pipe(Layer.provide(FundingMemory({ bench: 1_000_000_000 })))

/** The foods of the benchmark: USDA SR28 when it is at hand, else the small FoodData Central fixture of the tests. */
export const FOODS_DIR = hasSr28 ? SR28_DIR : FDC_FIXTURE_DIR

const foodRecords = async (): Promise<ReadonlyArray<FoodRecord>> => (await readDatasets(FOODS_DIR, () => {})).flatMap((d) => d.records)

/** The benchmark's foods stored in the database on its first start, as `morsel fooddb import` stores them. */
const storeFoodsOnce = Layer.effectDiscard(
  Effect.gen(function* () {
    const present = (yield* countFoods).reduce((n, row) => n + row.foods, 0)
    if (present === 0) yield* storeFoods(yield* Effect.promise(foodRecords), "benchmark foods")
  })
)

/**
 * The heap a food index of the benchmark's foods holds, measured around the making of one (the server's own index
 * is loaded from the database, where the parent imported the same foods).
 */
const foodIndexHeap = async () => {
  const records = await foodRecords()
  globalThis.gc?.()
  const before = process.memoryUsage().heapUsed
  const index = buildIndex(records)
  globalThis.gc?.()
  const heapMiB = (process.memoryUsage().heapUsed - before) / 2 ** 20
  return index.size > 0 ? heapMiB : 0
}

/** libvips' own allocations now and at their highest, in MiB (sharp tracks them whether or not it caches). */
const libvips = () => {
  const { memory } = sharp.cache()
  return { current: memory.current, high: memory.high }
}

/**
 * morsel's own HTTP stack and pipeline, on the configured database, with the benchmark's model and funding.
 * Answers a `memory` message from the parent with its breakdown (run with --expose-gc for used sizes after a GC),
 * and `food index` with the heap an index of its foods holds.
 */
export const morsel = async () => {
  const app = serveWith({
    vision: ZeroLatencyModel,
    foods: makeFoodDbLive().pipe(Layer.provide(storeFoodsOnce)),
    limits: LimitsLive,
    funding: BenchFunding,
    database: Database.layer,
    http: nodeServer({ host: "127.0.0.1", port: Number(process.env["PORT"]) })
  }).pipe(Layer.provide(LoggingLive), Layer.provide(AppConfigLive))
  Effect.runFork(Layer.launch(app))
  // The food index's heap is measured on request, after the figures: it reads the foods' files again.
  process.on("message", (message) => {
    if (message === "memory") {
      const vips = libvips()
      process.send?.(breakdown({ "libvips now": vips.current, "libvips peak": vips.high }))
    } else if (message === "food index") {
      void foodIndexHeap().then((heapMiB) => process.send?.(heapMiB))
    }
  })
  await announceWhenHealthy(Number(process.env["PORT"]))
}

/** The port morsel listens on is chosen by the parent (PORT) and announced once /health answers. */
const announceWhenHealthy = async (port: number) => {
  for (;;) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/health`)
      if (response.ok) return announce(port)
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

export const roles = { reference, morsel } as const

/**
 * Photos for the benchmark: a small plate for replays and challenges, and a phone-sized 2048 × 1536 JPEG of
 * 1.9–1.95 MB for the analysis overhead and the memory (noise on a colour gradient, which compresses as a
 * detailed photo does).
 */
export const photos = async () => {
  const small = await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 200, g: 120, b: 40 } } })
    .jpeg({ quality: 80 })
    .toBuffer()
  const width = 2048
  const height = 1536
  const pixels = Buffer.alloc(width * height * 3)
  let seed = 42
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const base = [60 + (x * 120) / width, 50 + (y * 100) / height, 90]
      for (let c = 0; c < 3; c++) {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff
        pixels[(y * width + x) * 3 + c] = Math.max(0, Math.min(255, (base[c] ?? 0) + ((seed >> 16) % 128) - 64))
      }
    }
  }
  const encode = (quality: number) => sharp(pixels, { raw: { width, height, channels: 3 } }).jpeg({ quality }).toBuffer()
  let quality = 95
  let large = await encode(quality)
  while (large.length > 1_950_000 && quality > 40) {
    quality -= 1
    large = await encode(quality)
  }
  return { small, large }
}
