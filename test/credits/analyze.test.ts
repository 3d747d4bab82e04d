// Card credits spent on POST /v1/analyze end to end: the production funding, the real stripe client on a fake
// processor, the real openai client on a fake model, and a real database (PostgreSQL when TEST_DATABASE_URL is set).
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { AppConfigFromEnv } from "../../src/config.ts"
import { CreditFunding } from "../../src/credits/CreditFunding.ts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { CreditsServicesLive } from "../../src/credits/layer.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { balanceOf, fakeStripe, keyWith, rest } from "../support/clients.ts"
import { TestDatabase } from "../support/database.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { errorCode } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"
import { bearerCredential, newRequestId, unsaved } from "../support/funding.ts"

const photo = await makeImage(320, 240, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }

const setup = Effect.gen(function* () {
  const stripe = yield* fakeStripe
  const fake = yield* startFakeOpenAI()
  fake.setFallback(Reply.answer(chickenRice))
  const database = yield* Layer.build(TestDatabase.pipe(Layer.orDie))
  const env = { ...stripe.env, OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url }
  const { url } = yield* startServer({
    env,
    dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited),
    database: Layer.succeedContext(database)
  })
  /** The credits services of another instance on the same database. */
  const onOtherInstance = <A, E>(effect: Effect.Effect<A, E, CreditFunding>) =>
    effect.pipe(
      Effect.provide(CreditsServicesLive.pipe(Layer.provide(Layer.succeedContext(database)), Layer.provide(AppConfigFromEnv(env)))),
      Effect.orDie
    )
  /** Spends credits without a model: reserve and consume, as finished analyses do. */
  const spend = (key: string, n: number, commit = true) =>
    onOtherInstance(
      Effect.gen(function* () {
        const funding = yield* CreditFunding
        const method = yield* funding.identify(bearerCredential(`Bearer ${key}`))
        yield* Effect.forEach(
          Array.from({ length: n }, () => newRequestId()),
          (id) => Effect.flatMap(method.reserve(id), (held) => (commit ? held.settle(unsaved) : Effect.void)),
          { concurrency: 8, discard: true }
        )
      })
    )
  const analyze = (key: string, idempotencyKey: string) =>
    rest(url, "/v1/analyze", key, body, { "idempotency-key": idempotencyKey })
  return { url, stripe, fake, spend, analyze, onOtherInstance }
})

describe("credits spent on analyses", () => {
  it.scopedLive("50 concurrent analyses against a key with 10 credits: exactly 10 succeed, the balance is 0", () =>
    Effect.gen(function* () {
      const { analyze, fake, spend, url, stripe } = yield* setup
      const key = yield* keyWith(url, stripe, 500)
      yield* spend(key, 490)
      expect(yield* balanceOf(url, key)).toBe(10)
      const answers = yield* Effect.all(
        Array.from({ length: 50 }, (_, i) => analyze(key, `fifty-at-once-${String(i).padStart(4, "0")}`)),
        { concurrency: "unbounded" }
      )
      const statuses = answers.map((a) => (a.status === 200 ? "ok" : `${a.status} ${String(errorCode(a))}`))
      expect(statuses.filter((s) => s === "ok")).toHaveLength(10)
      expect(statuses.filter((s) => s !== "ok")).toEqual(Array(40).fill("402 insufficient_credits"))
      expect(answers.find((a) => a.status === 200)?.headers.get("payment-response")).toBeNull()
      expect(fake.requests).toHaveLength(10)
      expect(yield* balanceOf(url, key)).toBe(0)
    }), 120_000)

  it.scopedLive("a refund after credits were spent pauses the key: balance shows 0, analyses answer 402 key_paused", () =>
    Effect.gen(function* () {
      const { analyze, fake, spend, url, stripe } = yield* setup
      const key = newCreditKey(true)
      const checkout = yield* rest(url, "/v1/credits/checkout", key, { order_id: crypto.randomUUID() })
      const sessionId = String((checkout.body as { session_id: string }).session_id)
      stripe.pay(sessionId)
      expect((yield* rest(url, "/v1/credits/confirm", key, { session_id: sessionId })).status).toBe(200)
      expect((yield* analyze(key, "before-the-refund-01")).status).toBe(200)
      yield* spend(key, 9)
      expect(yield* balanceOf(url, key)).toBe(490)
      const delivered = yield* Effect.promise(() => stripe.sendWebhook(`${url}/webhooks/stripe`, stripe.events.chargeRefunded(sessionId)))
      expect(delivered.status).toBe(200)
      const balance = yield* rest(url, "/v1/credits/balance", key)
      expect(balance.body).toMatchObject({ credits_remaining: 0, blocked: true })
      const paused = yield* analyze(key, "after-the-refund-001")
      expect(paused.status).toBe(402)
      expect(errorCode(paused)).toBe("key_paused")
      expect(fake.requests).toHaveLength(1)
      // A completed request still replays for its owner.
      expect((yield* analyze(key, "before-the-refund-01")).status).toBe(200)
    }), 60_000)

  it.scopedLive("credits held by analyses that ended without releasing them go back once their lease has passed", () =>
    Effect.gen(function* () {
      const { onOtherInstance, spend, url, stripe } = yield* setup
      const key = yield* keyWith(url, stripe, 500)
      // Reservations whose analysis never got recorded (a lost answer to the reserve call).
      yield* spend(key, 3, false)
      expect(yield* balanceOf(url, key)).toBe(497)
      yield* onOtherInstance(Effect.flatMap(CreditFunding, (f) => f.releaseOrphans(new Date(Date.now() - 60_000))))
      expect(yield* balanceOf(url, key)).toBe(497)
      yield* onOtherInstance(Effect.flatMap(CreditFunding, (f) => f.releaseOrphans(new Date(Date.now() + 1000))))
      expect(yield* balanceOf(url, key)).toBe(500)
    }), 60_000)
})
