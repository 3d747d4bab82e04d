// Feedback limits count the rolling day that ends now (per key and service-wide), on a real database under TestClock.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, TestClock } from "effect"
import { AppConfigFromEnv } from "../../src/config.ts"
import { Feedback, FeedbackLive } from "../../src/credits/Feedback.ts"
import { payerIdOf } from "../../src/credits/keys.ts"
import { KeyFingerprint } from "../../src/domain/ids.ts"
import { DAY_MS, HOUR_MS } from "../../src/limits/window.ts"
import { TestDatabase } from "../support/database.ts"
import { seedAnalysisRequest, seedOrder } from "./support.ts"

const MONDAY_1045 = Date.parse("2026-03-02T10:45:00Z")

const feedbackLayer = FeedbackLive.pipe(
  Layer.provideMerge(TestDatabase),
  Layer.provideMerge(AppConfigFromEnv({ LOG_LEVEL: "warning", LIMIT_FEEDBACK_PER_KEY_PER_DAY: "2", LIMIT_FEEDBACK_GLOBAL_PER_DAY: "3" })),
  Layer.orDie
)

/** A known key with one completed analysis per name, created now on the clock. */
const keyWith = (hexDigit: string) =>
  Effect.gen(function* () {
    const fingerprint = KeyFingerprint.make(hexDigit.repeat(64))
    yield* seedOrder(fingerprint)
    const now = new Date(yield* TestClock.currentTimeMillis)
    const request = () => seedAnalysisRequest({ payer: payerIdOf(fingerprint), status: "paid", createdAt: now })
    return { fingerprint, request }
  })

/** Submits feedback on a fresh completed request of `key`: "recorded", or the limit that refused it. */
const submit = (key: Effect.Effect.Success<ReturnType<typeof keyWith>>) =>
  Effect.gen(function* () {
    const feedback = yield* Feedback
    const requestId = yield* key.request()
    const outcome = yield* Effect.either(feedback.submit(key.fingerprint, { requestId, category: "helpful", note: "" }))
    if (Either.isRight(outcome)) return "recorded"
    return outcome.left._tag === "FeedbackLimited" ? `${outcome.left.scope}_limited` : outcome.left._tag
  }).pipe(Effect.orDie)

describe("feedback limits", () => {
  it.effect("2 per key and 3 service-wide per rolling day: each submission leaves the count exactly a day later", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      const alice = yield* keyWith("a")
      const bob = yield* keyWith("b")
      const carol = yield* keyWith("c")
      expect([yield* submit(alice), yield* submit(alice), yield* submit(alice)]).toEqual(["recorded", "recorded", "key_limited"])
      yield* TestClock.adjust(HOUR_MS)
      expect([yield* submit(bob), yield* submit(carol)]).toEqual(["recorded", "global_limited"])
      // Tuesday 00:00: a calendar day would start afresh; the rolling day still holds Monday's three.
      yield* TestClock.setTime(Date.parse("2026-03-03T00:00:00Z"))
      expect(yield* submit(alice)).toBe("key_limited")
      yield* TestClock.setTime(MONDAY_1045 + DAY_MS - 1)
      expect(yield* submit(carol)).toBe("global_limited")
      // Tuesday 10:45: Alice's two leave; Bob's of 11:45 stays.
      yield* TestClock.setTime(MONDAY_1045 + DAY_MS)
      expect([yield* submit(alice), yield* submit(carol), yield* submit(carol)]).toEqual(["recorded", "recorded", "global_limited"])
      yield* TestClock.setTime(MONDAY_1045 + DAY_MS + HOUR_MS)
      expect(yield* submit(carol)).toBe("recorded")
    }).pipe(Effect.provide(feedbackLayer)))
})
