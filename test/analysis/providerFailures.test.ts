// A failing model provider through HTTP with the real limits: a prompt 502, nothing charged, and never the payer's failure_limit.
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsLive } from "../../src/limits/Limits.ts"
import { type FakeReply, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { errorCode, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const photo = await makeImage(320, 240, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }
const DEADLINE_MS = 6_000

/** A server with the real limits, a failure limit of 3, a short deadline and 10 credits for alice. */
const setup = Effect.gen(function* () {
  const fake = yield* startFakeOpenAI()
  const funding = yield* Layer.build(FundingMemory({ alice: 10 }))
  const { url } = yield* startServer({
    env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url, LIMIT_FAILURES_PER_DAY: "3", ANALYSIS_TIMEOUT_MS: String(DEADLINE_MS) },
    dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, Layer.succeedContext(funding), LimitsLive)
  })
  let n = 0
  /** One analysis by alice under a new Idempotency-Key. */
  const analyze = Effect.promise(() =>
    send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": `provider-failure-${n++}-0000`, authorization: "Bearer memory_alice" } })
  )
  return { fake, analyze, ledger: Context.get(funding, FundingMemoryLedger) }
})

const failures: ReadonlyArray<readonly [string, FakeReply]> = [
  ["401", Reply.status(401, { code: "invalid_api_key" })],
  ["429", Reply.status(429, { code: "rate_limit_exceeded" })],
  ["503", Reply.status(503)],
  ["a dropped connection", Reply.drop()],
  ["a refusal", Reply.refusal()]
]

describe("a failing model provider", () => {
  it.scopedLive("401, 429, 503, dropped connections and a refusal: each a prompt 502; none counts toward failure_limit", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger } = yield* setup
      for (const [name, reply] of failures) {
        fake.setFallback(reply)
        const answer = yield* analyze
        expect(answer.status, `${name}: ${answer.text}`).toBe(502)
        // The bounded retries end before the deadline: no waiting it out into a 504.
        expect(errorCode(answer)).toBe("analysis_failed")
      }
      expect(yield* ledger.balances).toEqual({ alice: 10 })
      // A provider that hangs ends at the deadline (504): the provider's doing, not alice's.
      fake.setFallback(Reply.hang())
      const slow = yield* analyze
      expect(slow.status, slow.text).toBe(504)
      expect(errorCode(slow)).toBe("analysis_timeout")
      // Six unsuccessful analyses with a limit of three, and alice is still served.
      fake.setFallback(Reply.answer(chickenRice))
      const served = yield* analyze
      expect(served.status, served.text).toBe(200)
      expect(yield* ledger.balances).toEqual({ alice: 9 })
      expect(yield* ledger.reserved).toBe(0)
    }), 90_000)

  it.scopedLive("answers that break the rules and no food are the payer's failures: the fourth request is 429 failure_limit", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger } = yield* setup
      fake.enqueue(Reply.content("this is not JSON"), Reply.answer({ food_detected: false, dish_name: "", items: [] }), Reply.content("{}"))
      expect((yield* analyze).status).toBe(502)
      expect((yield* analyze).status).toBe(422)
      expect((yield* analyze).status).toBe(502)
      fake.setFallback(Reply.answer(chickenRice))
      const paused = yield* analyze
      expect(paused.status, paused.text).toBe(429)
      expect(errorCode(paused)).toBe("failure_limit")
      expect(paused.headers.get("retry-after")).toBe("3600")
      expect(yield* ledger.balances).toEqual({ alice: 10 })
    }))

  it.scopedLive("answers cut off by the server's own output-token cap are the operator's setting: none counts toward failure_limit", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger } = yield* setup
      const cutOff = Reply.content('{"food_detected": true, "dish_name": "Chicken and ri', { finishReason: "length" })
      fake.enqueue(cutOff, cutOff, cutOff, cutOff)
      for (let i = 0; i < 4; i++) {
        const answer = yield* analyze
        expect(answer.status, answer.text).toBe(502)
        expect(errorCode(answer)).toBe("analysis_failed")
      }
      // Four cut-off answers with a limit of three, and alice is still served.
      fake.setFallback(Reply.answer(chickenRice))
      const served = yield* analyze
      expect(served.status, served.text).toBe(200)
      expect(yield* ledger.balances).toEqual({ alice: 9 })
    }))
})
