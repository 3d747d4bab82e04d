/**
 * One way for the processor tests to act as the cardholder, the merchant and the processor's webhook sender,
 * whichever processor runs: the in-memory one, or Stripe (the real SDK) against the local fake Stripe API.
 */
import { Clock, ConfigProvider, Context, Effect, Layer, Option, TestClock } from "effect"
import Stripe from "stripe"
import { AppConfig, loadSettings } from "../../src/config.ts"
import type { DisputeStatus, Json, RefundStatus } from "../../src/credits/cards.ts"
import { CreditsServicesWith } from "../../src/credits/layer.ts"
import { MemoryCards, ProcessorMemory } from "../../src/credits/ProcessorMemory.ts"
import { type WebhookAnswer, Webhooks } from "../../src/credits/webhooks.ts"
import { TestDatabase } from "../support/database.ts"
import { creditsWithFake, Fake, PUBLIC_BASE_URL } from "./support.ts"

type EventName =
  | "completed"
  | "asyncSucceeded"
  | "asyncFailed"
  | "expired"
  | "chargeRefunded"
  | "refundCreated"
  | "refundUpdated"
  | "refundFailed"
  | "disputeCreated"
  | "disputeUpdated"
  | "disputeClosed"

export interface CardDriver {
  readonly name: "memory" | "stripe"
  readonly pay: (sessionId: string) => void
  readonly payAsync: (sessionId: string) => void
  readonly asyncSucceeds: (sessionId: string) => void
  readonly asyncFails: (sessionId: string) => void
  readonly expire: (sessionId: string) => void
  readonly refund: (sessionId: string, status?: RefundStatus) => Effect.Effect<string>
  readonly updateRefund: (refundId: string, status: RefundStatus) => void
  readonly dispute: (sessionId: string) => Effect.Effect<string>
  readonly updateDispute: (disputeId: string, status: DisputeStatus) => void
  /** The event as the processor would send it now (the id is a session, refund or dispute id). */
  readonly event: (name: EventName, id: string) => Effect.Effect<Json>
  /** Signs the event as the processor does and hands it to the webhook receiver. */
  readonly deliver: (event: Json) => Effect.Effect<WebhookAnswer>
  readonly seedSessions: (n: number) => Effect.Effect<void>
  /** The next `n` processor calls fail as unavailable (the SDK's own retries included). */
  readonly failCalls: (n: number) => void
  readonly listCalls: () => number
  /** Pins the test clock (and the processor's) to now; `advance` moves both. */
  readonly pinClock: Effect.Effect<void>
  readonly advance: (ms: number) => Effect.Effect<void>
}

export class Driver extends Context.Tag("test/CardDriver")<Driver, CardDriver>() {}

/** Settings in test mode without Stripe: the in-memory processor makes `cs_test_…` sessions. */
export const testModeConfig = (env: Readonly<Record<string, string>> = {}) =>
  Layer.effect(
    AppConfig,
    loadSettings.pipe(
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries({ PUBLIC_BASE_URL, LOG_LEVEL: "warning", ...env })))),
      Effect.map((settings) => ({ ...settings, testMode: true }))
    )
  )

/** The credits services on the in-memory processor and a fresh test database. */
export const creditsWithMemory = (env: Readonly<Record<string, string>> = {}) =>
  CreditsServicesWith(ProcessorMemory).pipe(Layer.provideMerge(TestDatabase), Layer.provideMerge(testModeConfig(env)), Layer.orDie)

const MemoryDriver = Layer.effect(
  Driver,
  Effect.gen(function* () {
    const memory = yield* MemoryCards
    const webhooks = yield* Webhooks
    const { cards } = memory
    const at = <A>(f: (now: number) => A) => Effect.map(memory.nowSeconds, f)
    return {
      name: "memory",
      pay: (id) => void cards.pay(id),
      payAsync: (id) => void cards.payAsync(id),
      asyncSucceeds: (id) => void cards.asyncSucceeds(id),
      asyncFails: (id) => void cards.asyncFails(id),
      expire: (id) => void cards.expire(id),
      refund: (id, status = "succeeded") => at((now) => cards.refund(id, status, now).id),
      updateRefund: (id, status) => void cards.updateRefund(id, status),
      dispute: (id) => at((now) => cards.dispute(id, "needs_response", now).id),
      updateDispute: (id, status) => void cards.updateDispute(id, status),
      event: (name, id) => at((now) => cards.events[name](id, now)),
      deliver: (event) =>
        Effect.flatMap(memory.sign(event), ({ body, signature }) => webhooks.receive(Option.some(body), signature)),
      seedSessions: (n) => at((now) => cards.seedSessions(n, now)),
      failCalls: memory.failNext,
      listCalls: () => memory.calls.list,
      pinClock: TestClock.setTime(Date.now()),
      advance: (ms) => TestClock.adjust(ms)
    } satisfies CardDriver
  })
)

const StripeDriver = Layer.effect(
  Driver,
  Effect.gen(function* () {
    const fake = yield* Fake
    const webhooks = yield* Webhooks
    const syncFake = Effect.map(Clock.currentTimeMillis, (ms) => fake.setNow(Math.floor(ms / 1000)))
    return {
      name: "stripe",
      pay: (id) => void fake.pay(id),
      payAsync: (id) => void fake.payAsync(id),
      asyncSucceeds: (id) => void fake.asyncSucceeds(id),
      asyncFails: (id) => void fake.asyncFails(id),
      expire: (id) => void fake.expire(id),
      refund: (id, status = "succeeded") => Effect.sync(() => fake.refund(id, status)),
      updateRefund: (id, status) => void fake.updateRefund(id, status),
      dispute: (id) => Effect.sync(() => fake.dispute(id)),
      updateDispute: (id, status) => void fake.updateDispute(id, status),
      event: (name, id) => Effect.sync(() => fake.events[name](id)),
      deliver: (event) =>
        Effect.flatMap(Clock.currentTimeMillis, (ms) => {
          const body = JSON.stringify(event)
          const signature = Stripe.webhooks.generateTestHeaderString({
            payload: body,
            secret: fake.webhookSecret,
            timestamp: Math.floor(ms / 1000)
          })
          return webhooks.receive(Option.some(body), signature)
        }),
      seedSessions: (n) => Effect.sync(() => fake.seedSessions(n)),
      // stripe-node retries twice: three answers of 500 make one failed call.
      failCalls: (n) => fake.failNext(3 * n),
      listCalls: () => fake.calls.list,
      pinClock: Effect.zipRight(TestClock.setTime(Date.now()), syncFake),
      advance: (ms) => Effect.zipRight(TestClock.adjust(ms), syncFake)
    } satisfies CardDriver
  })
)

/** What a processor test can use, whichever processor runs. */
export type UnderTest = Layer.Layer<Driver | Exclude<Layer.Layer.Success<ReturnType<typeof creditsWithMemory>>, MemoryCards>>

/** The in-memory processor with its driver, the credits services and a fresh database. */
export const memoryUnderTest: UnderTest = MemoryDriver.pipe(Layer.provideMerge(creditsWithMemory()))

/** Stripe (the real SDK against the fake Stripe API) with its driver, the credits services and a fresh database. */
export const stripeUnderTest: UnderTest = StripeDriver.pipe(Layer.provideMerge(creditsWithFake()))
