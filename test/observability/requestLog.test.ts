import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, Layer, Logger, type LogLevel, Option } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const noMatches = Layer.succeed(FoodDb, { matcherVersion: "test", match: () => Effect.succeedNone, ...noFoods })
const vision = Layer.succeed(VisionModel, { model: "scripted", analyze: () => Effect.succeed(chickenRice) })
const dependencies = Layer.mergeAll(vision, noMatches, FundingMemory({ alice: 5 }), LimitsUnlimited)
const image = await makeImage(64, 48, "png")
/** x402 on a chain never reached: a challenge needs none. */
const x402OnNoChain = { X402_PAY_TO: "0x1111111111111111111111111111111111111111", X402_SETTLER_PRIVATE_KEY: `0x${"11".repeat(32)}`, X402_RPC_URL: "http://127.0.0.1:9" }

interface Line {
  readonly level: LogLevel.LogLevel["label"]
  readonly message: string
  readonly status: unknown
}

/** The lines a server logs, at the level the settings give it, while `calls` are answered. */
const linesDuring = (logLevel: string, calls: (url: string) => Promise<ReadonlyArray<number>>) =>
  Effect.gen(function* () {
    const lines: Array<Line> = []
    const capture = Logger.make(({ annotations, logLevel: level, message }) => {
      const text = Array.isArray(message) ? message.join(" ") : String(message)
      lines.push({ level: level.label, message: text, status: Option.getOrUndefined(HashMap.get(annotations, "http.status")) })
    })
    const statuses = yield* Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies, env: { LOG_LEVEL: logLevel, ...x402OnNoChain } })
      return yield* Effect.promise(() => calls(url))
    }).pipe(Effect.provide(Logger.add(capture)))
    return { statuses, answers: lines.filter((line) => line.message === "Sent HTTP response") }
  })

/** GET /health (the HttpApi stack), a 404, and an unfunded analysis (its 402 answered by the fast lane). */
const threeCalls = async (url: string) => [
  (await send(`${url}/health`)).status,
  (await send(`${url}/nowhere`)).status,
  (await send(`${url}/v1/analyze`, { headers: { "idempotency-key": "request-log-key-0001" }, body: { image_base64: image.base64, mime_type: image.mime } })).status
]

describe("the log of answered requests", () => {
  it.scoped("at the default level (info) an answer logs nothing", () =>
    Effect.gen(function* () {
      const { answers, statuses } = yield* linesDuring("info", threeCalls)
      expect(statuses).toEqual([200, 404, 402])
      expect(answers).toEqual([])
    }), 120_000)

  it.scoped("LOG_LEVEL=debug: one line per answer with its status, from the stack and from the lane", () =>
    Effect.gen(function* () {
      const { answers, statuses } = yield* linesDuring("debug", threeCalls)
      expect(statuses).toEqual([200, 404, 402])
      expect(answers.map((line) => [line.level, line.status])).toEqual([
        ["DEBUG", 200],
        ["DEBUG", 404],
        ["DEBUG", 402]
      ])
    }), 120_000)
})
