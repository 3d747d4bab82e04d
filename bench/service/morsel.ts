/**
 * The benchmark's morsel: the service's own HTTP stack and pipeline with a model of no latency and credits in
 * memory. It imports only what the server needs (sharp is loaded by the first photo, as in `morsel serve`), so
 * that its memory is the shipped server's.
 */
import { readFileSync } from "node:fs"
import { Effect, Layer } from "effect"
import { Funding } from "../../src/analysis/Funding.ts"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { type ModelItem, VisionModel } from "../../src/analysis/VisionModel.ts"
import { prepareImage } from "../../src/analysis/VisionModelLive.ts"
import { AppConfigLive } from "../../src/config.ts"
import * as Database from "../../src/db/Database.ts"
import { makeFoodDbLive } from "../../src/foods/core/FoodDbLive.ts"
import type { FoodRecord } from "../../src/foods/core/records.ts"
import { countFoods } from "../../src/foods/core/repository.ts"
import { nodeServer } from "../../src/http/nodeServer.ts"
import { LimitsLive } from "../../src/limits/Limits.ts"
import { LoggingLive } from "../../src/logging.ts"
import { collectStartGarbage } from "../../src/memory.ts"
import { serveWith } from "../../src/server.ts"
import { X402Funding } from "../../src/x402/X402Funding.ts"
import { DEV_FOODS } from "../../test/foods/devset.ts"
import { FDC_FIXTURE_DIR, hasSr28, SR28_DIR } from "../../test/foods/paths.ts"
import { healthy, send } from "./load.ts"
import { breakdown } from "./memory.ts"

/** Tells the parent where the server listens, on one stdout line (the reference seller's role says it too). */
export const announce = (port: number) => process.stdout.write(`READY ${port}\n`)

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

/** Read as `fooddb import` reads them; the importer's code is loaded only here, as the server does not load it. */
const foodRecords = async (): Promise<ReadonlyArray<FoodRecord>> => {
  const { readDatasets } = await import("../../src/foods/core/sources.ts")
  return (await readDatasets(FOODS_DIR, () => {})).flatMap((d) => d.records)
}

/** The benchmark's foods stored in the database on its first start, as `morsel fooddb import` stores them. */
const storeFoodsOnce = Layer.effectDiscard(
  Effect.gen(function* () {
    const present = (yield* countFoods).reduce((n, row) => n + row.foods, 0)
    if (present === 0) {
      const [{ storeFoods }, records] = yield* Effect.promise(() => Promise.all([import("../../src/foods/core/shipped.ts"), foodRecords()]))
      yield* storeFoods(records, "benchmark foods")
    }
  })
)

/**
 * The heap a food index of the benchmark's foods holds, measured around the making of one (the server's own index
 * is loaded from the database, where the parent imported the same foods).
 */
const foodIndexHeap = async () => {
  const [{ buildIndex }, records] = await Promise.all([import("../../src/foods/core/matcher.ts"), foodRecords()])
  globalThis.gc?.()
  const before = process.memoryUsage().heapUsed
  const index = buildIndex(records)
  globalThis.gc?.()
  const heapMiB = (process.memoryUsage().heapUsed - before) / 2 ** 20
  return index.size > 0 ? heapMiB : 0
}

/**
 * libvips' own allocations now and at their highest, in MiB (sharp tracks them whether or not it caches); zeros
 * before the first photo has loaded sharp, which asking would load.
 */
const libvips = async () => {
  if (!readFileSync("/proc/self/maps", "utf8").includes("libvips")) return { current: 0, high: 0 }
  const { memory } = (await import("sharp")).default.cache()
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
    database: Database.servingLayer,
    http: nodeServer({ host: "127.0.0.1", port: Number(process.env["PORT"]) })
  }).pipe(Layer.provide(LoggingLive), Layer.provide(AppConfigLive))
  // As `morsel serve` does: the start's garbage is collected once the server is ready.
  Effect.runFork(Layer.launch(app.pipe(Layer.tap(() => collectStartGarbage))))
  // The food index's heap is measured on request, after the figures: it reads the foods' files again.
  process.on("message", (message) => {
    if (message === "memory") {
      void libvips().then((vips) => process.send?.(breakdown({ "libvips now": vips.current, "libvips peak": vips.high })))
    } else if (message === "food index") {
      void foodIndexHeap().then((heapMiB) => process.send?.(heapMiB))
    }
  })
  await announceWhenHealthy(Number(process.env["PORT"]))
}

/**
 * The port morsel listens on is chosen by the parent (PORT) and announced once /health answers; asked with node:http,
 * which the server loads anyway (`fetch` would load Node's own HTTP client, which the server does not hold).
 */
const announceWhenHealthy = async (port: number) => {
  for (;;) {
    if (await healthy(port)) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  // The food index is built once the server listens: the figures are of a server that holds it.
  await send(port, { method: "GET", path: "/v1/foods?q=rice&limit=1" }, undefined, 300_000)
  announce(port)
}
