/** The servers the service benchmark measures, each run in its own process: morsel itself and its baselines. */
import type { AddressInfo } from "node:net"
import { type FacilitatorClient, x402ResourceServer } from "@x402/core/server"
import type { SupportedResponse } from "@x402/core/types"
import { ExactEvmScheme } from "@x402/evm/exact/server"
import { paymentMiddleware } from "@x402/express"
import express from "express"
import sharp from "sharp"
import { NETWORK } from "../../src/x402/protocol.ts"
import type { Call } from "./load.ts"
import { announce, morsel } from "./morsel.ts"

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
    ["GLOBAL_PER_DAY", "GLOBAL_PER_HOUR", "PAYER_PER_DAY", "CONCURRENT", "X402_PER_DAY", "X402_PER_HOUR", "X402_CONCURRENT", "FOODS_PER_MINUTE"].map((name) => [
      `LIMIT_${name}`,
      "1000000"
    ])
  )
})

/** POST /v1/analyze paid with credits: the in-memory credits of the profiled role, or a funded key's `authorization`. */
export const analyzeCall = (image: Buffer, key: string, language: "en" | "lt" = "en", authorization = BENCH_KEY): Call => ({
  method: "POST",
  path: "/v1/analyze",
  headers: { authorization, "idempotency-key": key },
  body: Buffer.from(JSON.stringify({ image_base64: image.toString("base64"), mime_type: "image/jpeg", language }))
})

/** POST /v1/nutrition with `count` items of a meal, every other one by text and the rest by id (or all by text). */
export const nutritionCall = (count: number, byText = false): Call => {
  const texts = ["rice, white, cooked", "chicken breast", "broccoli", "olive oil", "tofu"]
  const ids = ["20045", "05064", "11090", "04053", "16427"]
  const items = Array.from({ length: count }, (_, i) => (byText || i % 2 === 0 ? { query: texts[Math.floor(i / 2) % texts.length], grams: 100 } : { fdc_id: ids[i % ids.length], grams: 50 }))
  return { method: "POST", path: "/v1/nutrition", body: Buffer.from(JSON.stringify({ items })) }
}

/** The x402 reference seller: `@x402/express`'s payment middleware on an express app, answering POST /v1/analyze. */
export const reference = async () => {
  const supported: SupportedResponse = { kinds: [{ x402Version: 2, scheme: "exact", network: NETWORK }], extensions: [], signers: {} }
  const facilitator: FacilitatorClient = {
    getSupported: async () => supported,
    verify: async () => ({ isValid: false, invalidReason: "unused" }),
    settle: async () => ({ success: false, errorReason: "unused", transaction: "", network: NETWORK })
  }
  const core = new x402ResourceServer(facilitator).register(NETWORK, new ExactEvmScheme())
  const routes = {
    "POST /v1/analyze": {
      accepts: { scheme: "exact", price: "$0.01", network: NETWORK, payTo: PAY_TO, maxTimeoutSeconds: 600 },
      description: "One food-photo nutrition analysis; paid only when the analysis succeeds",
      mimeType: "application/json"
    }
  } as const
  const app = express()
  app.use(paymentMiddleware(routes, core))
  app.post("/v1/analyze", (_request, response) => {
    response.json({})
  })
  const server = app.listen(0, "127.0.0.1", () => announce((server.address() as AddressInfo).port))
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
  return { small, large: await photoOf(2048, 1536, 1_950_000) }
}

/** A width × height JPEG of at most `maxBytes`, as large as a quality step allows: noise on a colour gradient. */
export const photoOf = async (width: number, height: number, maxBytes: number) => {
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
  while (large.length > maxBytes && quality > 20) {
    quality -= 1
    large = await encode(quality)
  }
  return large
}
