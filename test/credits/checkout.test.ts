import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option, TestClock } from "effect"
import { Checkout, type CheckoutResult } from "../../src/credits/Checkout.ts"
import { Ledger } from "../../src/credits/Ledger.ts"
import { auditLedger, creditsWithFake, Fake, freshKey, PUBLIC_BASE_URL } from "./support.ts"

const HOUR = 3600 * 1000

const sessionOf = (result: CheckoutResult) => {
  if (result._tag !== "Session") throw new Error(`expected a session, got ${JSON.stringify(result)}`)
  return result
}

const errorCodeOf = <A, E extends { readonly error: { readonly code: string } }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), (r) => (Either.isLeft(r) ? r.left.error.code : "succeeded"))

const stateOf = (fingerprint: string, orderId: string) =>
  Effect.flatMap(Checkout, (c) => c.status(fingerprint, orderId)).pipe(Effect.map((v) => v.state))

const available = (fingerprint: string) =>
  Effect.flatMap(Ledger, (l) => l.account(fingerprint)).pipe(Effect.map((a) => Option.getOrThrow(a).available))

/** Pins the test clock and the fake's clock to the same instant. */
const pinClocks = Effect.gen(function* () {
  const fake = yield* Fake
  const start = Date.now()
  yield* TestClock.setTime(start)
  fake.setNow(Math.floor(start / 1000))
  return start
})

const advance = (ms: number) =>
  Effect.gen(function* () {
    const fake = yield* Fake
    yield* TestClock.adjust(ms)
    fake.setNow(undefined)
    const now = yield* TestClock.currentTimeMillis
    fake.setNow(Math.floor(now / 1000))
  })

describe("checkout orders", () => {
  it.layer(creditsWithFake())("with the fake processor", (it) => {
    it.effect("creates a hosted checkout whose amount, tax and metadata can be verified", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const checkout = yield* Checkout
        yield* pinClocks
        const { fingerprint } = yield* freshKey
        const orderId = crypto.randomUUID()
        const first = sessionOf(yield* checkout.checkout(fingerprint, orderId, Option.some({ channel: "agent" })))
        expect(first.sessionId).toMatch(/^cs_test_[A-Za-z0-9]+$/)
        const params = fake.paramsOf(first.sessionId)
        expect(params).toMatchObject({
          mode: "payment",
          line_items: { "0": { quantity: "1", price_data: { currency: "usd", unit_amount: "500", tax_behavior: "inclusive" } } },
          automatic_tax: { enabled: "true" },
          allow_promotion_codes: "false",
          adaptive_pricing: { enabled: "false" },
          client_reference_id: orderId,
          metadata: { order_id: orderId, key_fingerprint: fingerprint },
          payment_intent_data: { metadata: { order_id: orderId, key_fingerprint: fingerprint } }
        })
        expect(String(fake.session(first.sessionId).success_url)).toMatch(new RegExp(`^${PUBLIC_BASE_URL}/`))
        const lifetime = fake.session(first.sessionId).expires_at - fake.session(first.sessionId).created
        expect(lifetime).toBeGreaterThanOrEqual(1800)
        expect(lifetime).toBeLessThanOrEqual(24 * 3600)

        // A retry returns the same checkout; the first context wins.
        const again = sessionOf(yield* checkout.checkout(fingerprint, orderId, Option.some({ channel: "website" })))
        expect(again.sessionId).toBe(first.sessionId)
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ context: unknown }>`SELECT context FROM credit_orders WHERE order_id = ${orderId}`
        expect(row?.context).toEqual({ channel: "agent" })

        // The answer of a create was lost: the retry sends the saved parameters under the same idempotency key.
        yield* sql`UPDATE credit_orders SET session_id = NULL, checkout_url = NULL WHERE order_id = ${orderId}`
        const replayedBefore = fake.calls.createReplayed
        const recovered = sessionOf(yield* checkout.checkout(fingerprint, orderId, Option.none()))
        expect(recovered.sessionId).toBe(first.sessionId)
        expect(fake.calls.createReplayed).toBe(replayedBefore + 1)
      }))

    it.effect("pending → paid through checkout-status before any webhook; a completed order gets no new checkout", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const checkout = yield* Checkout
        yield* pinClocks
        const { fingerprint } = yield* freshKey
        const orderId = crypto.randomUUID()
        const session = sessionOf(yield* checkout.checkout(fingerprint, orderId, Option.none()))
        expect(yield* stateOf(fingerprint, orderId)).toBe("open")
        fake.pay(session.sessionId)
        expect(yield* stateOf(fingerprint, orderId)).toBe("paid")
        expect(yield* available(fingerprint)).toBe(500)
        expect(yield* stateOf(fingerprint, orderId)).toBe("paid")
        const creates = fake.calls.create
        expect(yield* checkout.checkout(fingerprint, orderId, Option.none())).toEqual({ _tag: "Completed", orderId, state: "paid" })
        expect(fake.calls.create).toBe(creates)
        // Confirm after the status recovery grants nothing more.
        expect(yield* checkout.confirm(fingerprint, session.sessionId)).toBe("already_granted")
        expect(yield* available(fingerprint)).toBe(500)
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("a new explicit order only after paid, expired or not_issued", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const checkout = yield* Checkout
        yield* pinClocks
        const { fingerprint } = yield* freshKey
        const first = crypto.randomUUID()
        const s1 = sessionOf(yield* checkout.checkout(fingerprint, first, Option.none()))
        expect(yield* errorCodeOf(checkout.checkout(fingerprint, crypto.randomUUID(), Option.none()))).toBe("order_conflict")
        fake.expire(s1.sessionId)
        expect(yield* stateOf(fingerprint, first)).toBe("expired")
        // The expired order itself cannot be revived; a new one can be made.
        expect(yield* errorCodeOf(checkout.checkout(fingerprint, first, Option.none()))).toBe("order_conflict")
        const second = crypto.randomUUID()
        const s2 = sessionOf(yield* checkout.checkout(fingerprint, second, Option.none()))
        fake.pay(s2.sessionId)
        // The pending order is read from the processor before the new one is allowed: paid → allowed.
        const third = crypto.randomUUID()
        sessionOf(yield* checkout.checkout(fingerprint, third, Option.none()))
        expect(yield* stateOf(fingerprint, second)).toBe("paid")
        expect(yield* stateOf(fingerprint, third)).toBe("open")
      }))

    it.effect("another key's order: 404 on checkout-status, 409 on checkout, 409 on confirm", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const checkout = yield* Checkout
        yield* pinClocks
        const owner = yield* freshKey
        const other = yield* freshKey
        const orderId = crypto.randomUUID()
        const s = sessionOf(yield* checkout.checkout(owner.fingerprint, orderId, Option.none()))
        expect(yield* errorCodeOf(checkout.status(other.fingerprint, orderId))).toBe("order_not_found")
        expect(yield* errorCodeOf(checkout.status(owner.fingerprint, crypto.randomUUID()))).toBe("order_not_found")
        expect(yield* errorCodeOf(checkout.checkout(other.fingerprint, orderId, Option.none()))).toBe("order_conflict")
        expect(yield* errorCodeOf(checkout.confirm(owner.fingerprint, s.sessionId))).toBe("payment_unconfirmed")
        fake.pay(s.sessionId)
        expect(yield* errorCodeOf(checkout.confirm(other.fingerprint, s.sessionId))).toBe("payment_unconfirmed")
        expect(yield* errorCodeOf(checkout.confirm(owner.fingerprint, "cs_test_doesnotexist"))).toBe("payment_unconfirmed")
        expect(yield* checkout.confirm(owner.fingerprint, s.sessionId)).toBe("granted")
        expect(yield* available(owner.fingerprint)).toBe(500)
      }))

    it.effect("a lost session is found by listing; without one the order is unresolved until 48 h and a complete empty listing", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const checkout = yield* Checkout
        const sql = yield* SqlClient.SqlClient
        yield* pinClocks
        const { fingerprint } = yield* freshKey

        // The processor is down: the order is stored, its session never created.
        const orderId = crypto.randomUUID()
        fake.failNext(3)
        expect(yield* errorCodeOf(checkout.checkout(fingerprint, orderId, Option.none()))).toBe("processor_unavailable")
        expect(yield* stateOf(fingerprint, orderId)).toBe("unresolved")
        // Another order is refused while this one is unresolved.
        expect(yield* errorCodeOf(checkout.checkout(fingerprint, crypto.randomUUID(), Option.none()))).toBe("order_conflict")
        yield* advance(47 * HOUR)
        expect(yield* stateOf(fingerprint, orderId)).toBe("unresolved")
        yield* advance(1 * HOUR)
        expect(yield* stateOf(fingerprint, orderId)).toBe("not_issued")
        expect(yield* stateOf(fingerprint, orderId)).toBe("not_issued")

        // A created session whose answer was lost is found by the listing (on page 4 behind 350 newer ones).
        const next = crypto.randomUUID()
        const s = sessionOf(yield* checkout.checkout(fingerprint, next, Option.none()))
        yield* sql`UPDATE credit_orders SET session_id = NULL, checkout_url = NULL WHERE order_id = ${next}`
        fake.seedSessions(350)
        const listed = fake.calls.list
        expect(yield* stateOf(fingerprint, next)).toBe("open")
        expect(fake.calls.list - listed).toBe(4)
        const [row] = yield* sql<{ session_id: string | null }>`SELECT session_id FROM credit_orders WHERE order_id = ${next}`
        expect(row?.session_id).toBe(s.sessionId)
      }))

    it.effect("a six-page listing is never complete: unresolved even after 48 h", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const checkout = yield* Checkout
        yield* pinClocks
        const { fingerprint } = yield* freshKey
        const orderId = crypto.randomUUID()
        fake.failNext(3)
        expect(yield* errorCodeOf(checkout.checkout(fingerprint, orderId, Option.none()))).toBe("processor_unavailable")
        fake.seedSessions(550)
        yield* advance(49 * HOUR)
        const listed = fake.calls.list
        expect(yield* stateOf(fingerprint, orderId)).toBe("unresolved")
        expect(fake.calls.list - listed).toBe(5)
        // With one page fewer the same listing is complete and empty.
        fake.sessions.forEach((s, id) => {
          if (s.client_reference_id !== orderId && fake.sessions.size > 450) fake.sessions.delete(id)
        })
        expect(yield* stateOf(fingerprint, orderId)).toBe("not_issued")
      }))
  })
})
