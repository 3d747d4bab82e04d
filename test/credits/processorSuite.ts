/**
 * The card processor seam's behaviour: one suite, run against each implementation (processorMemory.test.ts and
 * processorStripe.test.ts, one file each so their layers never mix). Orders, listing, confirm and webhooks alike.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { Checkout, type CheckoutResult } from "../../src/credits/Checkout.ts"
import { Ledger } from "../../src/credits/Ledger.ts"
import { Driver, type UnderTest } from "./drivers.ts"
import { everyOrder } from "./reversalOrders.ts"
import { auditLedger, freshKey, PUBLIC_BASE_URL } from "./support.ts"

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

/** A fresh key with an open checkout. */
const openOrder = Effect.gen(function* () {
  const checkout = yield* Checkout
  const { fingerprint } = yield* freshKey
  const orderId = crypto.randomUUID()
  const session = sessionOf(yield* checkout.checkout(fingerprint, orderId, Option.none()))
  return { fingerprint, orderId, sessionId: session.sessionId, checkoutUrl: session.checkoutUrl }
})

export const processorSuite = (name: string, layer: UnderTest) =>
  describe(`card processor: ${name}`, () => {
    it.layer(layer)("behaviour", (it) => {
      it.effect("a checkout is a test-mode session; retries, even after a lost answer, give the same one", () =>
        Effect.gen(function* () {
          const driver = yield* Driver
          const checkout = yield* Checkout
          yield* driver.pinClock
          const { fingerprint, orderId, sessionId, checkoutUrl } = yield* openOrder
          expect(sessionId).toMatch(/^cs_test_[A-Za-z0-9]+$/)
          expect(checkoutUrl).toMatch(/^http/)
          if (driver.name === "memory") expect(checkoutUrl).toBe(`${PUBLIC_BASE_URL}/sandbox/checkout/${sessionId}`)
          expect(sessionOf(yield* checkout.checkout(fingerprint, orderId, Option.none())).sessionId).toBe(sessionId)
          expect(yield* stateOf(fingerprint, orderId)).toBe("open")
          // The processor is down: a new order is stored, answered 503, and its retry creates the session once.
          const other = yield* freshKey
          const next = crypto.randomUUID()
          driver.failCalls(1)
          expect(yield* errorCodeOf(checkout.checkout(other.fingerprint, next, Option.none()))).toBe("processor_unavailable")
          const retried = sessionOf(yield* checkout.checkout(other.fingerprint, next, Option.none()))
          expect(sessionOf(yield* checkout.checkout(other.fingerprint, next, Option.none())).sessionId).toBe(retried.sessionId)
        }))

      it.effect("paid: status, confirm and the completed webhook grant once, in any order", () =>
        Effect.gen(function* () {
          const driver = yield* Driver
          const checkout = yield* Checkout
          yield* driver.pinClock
          const a = yield* openOrder
          driver.pay(a.sessionId)
          expect(yield* stateOf(a.fingerprint, a.orderId)).toBe("paid")
          expect(yield* checkout.confirm(a.fingerprint, a.sessionId)).toBe("already_granted")
          expect((yield* driver.deliver(yield* driver.event("completed", a.sessionId))).status).toBe(200)
          expect(yield* available(a.fingerprint)).toBe(500)

          const b = yield* openOrder
          driver.pay(b.sessionId)
          const completed = yield* driver.event("completed", b.sessionId)
          for (let i = 0; i < 3; i++) expect((yield* driver.deliver(completed)).status).toBe(200)
          expect(yield* checkout.confirm(b.fingerprint, b.sessionId)).toBe("already_granted")
          expect(yield* checkout.checkout(b.fingerprint, b.orderId, Option.none())).toEqual({ _tag: "Completed", orderId: b.orderId, state: "paid" })
          expect(yield* available(b.fingerprint)).toBe(500)
          // Another key cannot confirm it; an unknown session is unconfirmed; a bad signature is refused.
          const stranger = yield* freshKey
          expect(yield* errorCodeOf(checkout.confirm(stranger.fingerprint, b.sessionId))).toBe("payment_unconfirmed")
          expect(yield* errorCodeOf(checkout.confirm(b.fingerprint, "cs_test_doesnotexist"))).toBe("payment_unconfirmed")
          expect(yield* auditLedger).toEqual([])
        }))

      it.effect("expired and failed delayed payments end the order; a delayed success grants", () =>
        Effect.gen(function* () {
          const driver = yield* Driver
          yield* driver.pinClock
          const a = yield* openOrder
          driver.expire(a.sessionId)
          expect(yield* stateOf(a.fingerprint, a.orderId)).toBe("expired")

          const b = yield* openOrder
          driver.payAsync(b.sessionId)
          expect((yield* driver.deliver(yield* driver.event("completed", b.sessionId))).status).toBe(200)
          expect(yield* stateOf(b.fingerprint, b.orderId)).toBe("open")
          driver.asyncSucceeds(b.sessionId)
          expect((yield* driver.deliver(yield* driver.event("asyncSucceeded", b.sessionId))).status).toBe(200)
          expect(yield* available(b.fingerprint)).toBe(500)

          const c = yield* openOrder
          driver.payAsync(c.sessionId)
          driver.asyncFails(c.sessionId)
          expect((yield* driver.deliver(yield* driver.event("asyncFailed", c.sessionId))).status).toBe(200)
          expect(yield* stateOf(c.fingerprint, c.orderId)).toBe("expired")
          expect(yield* available(c.fingerprint)).toBe(0)

          // An open session left alone expires at its expires_at (23 h).
          const d = yield* openOrder
          yield* driver.advance(24 * HOUR)
          expect(yield* stateOf(d.fingerprint, d.orderId)).toBe("expired")
        }))

      it.effect("a lost session is found by listing; without one, not_issued only after 48 h and a complete listing of at most five pages", () =>
        Effect.gen(function* () {
          const driver = yield* Driver
          const checkout = yield* Checkout
          yield* driver.pinClock
          const { fingerprint } = yield* freshKey
          const orderId = crypto.randomUUID()
          driver.failCalls(1)
          expect(yield* errorCodeOf(checkout.checkout(fingerprint, orderId, Option.none()))).toBe("processor_unavailable")
          expect(yield* stateOf(fingerprint, orderId)).toBe("unresolved")
          yield* driver.seedSessions(550)
          yield* driver.advance(49 * HOUR)
          const listed = driver.listCalls()
          expect(yield* stateOf(fingerprint, orderId)).toBe("unresolved")
          expect(driver.listCalls() - listed).toBe(5)

          // Sessions created now are outside the order's interval: the listing of its interval is complete and empty.
          const other = yield* freshKey
          const late = crypto.randomUUID()
          driver.failCalls(1)
          expect(yield* errorCodeOf(checkout.checkout(other.fingerprint, late, Option.none()))).toBe("processor_unavailable")
          yield* driver.advance(47 * HOUR)
          expect(yield* stateOf(other.fingerprint, late)).toBe("unresolved")
          yield* driver.advance(1 * HOUR)
          expect(yield* stateOf(other.fingerprint, late)).toBe("not_issued")
        }))

      it.effect("refund and dispute events delivered in every order, duplicated, end where the processor's story ends", () => everyOrder, 120_000)

      it.effect("refunds and disputes: reversed while they stand, restored when they fail or are won", () =>
        Effect.gen(function* () {
          const driver = yield* Driver
          yield* driver.pinClock
          const a = yield* openOrder
          driver.pay(a.sessionId)
          expect((yield* driver.deliver(yield* driver.event("completed", a.sessionId))).status).toBe(200)
          const refund = yield* driver.refund(a.sessionId, "pending")
          expect((yield* driver.deliver(yield* driver.event("refundCreated", refund))).status).toBe(200)
          expect(yield* stateOf(a.fingerprint, a.orderId)).toBe("reversed")
          driver.updateRefund(refund, "failed")
          expect((yield* driver.deliver(yield* driver.event("refundFailed", refund))).status).toBe(200)
          expect(yield* stateOf(a.fingerprint, a.orderId)).toBe("paid")
          expect(yield* available(a.fingerprint)).toBe(500)

          const dispute = yield* driver.dispute(a.sessionId)
          expect((yield* driver.deliver(yield* driver.event("disputeCreated", dispute))).status).toBe(200)
          expect(yield* available(a.fingerprint)).toBe(0)
          driver.updateDispute(dispute, "won")
          expect((yield* driver.deliver(yield* driver.event("disputeClosed", dispute))).status).toBe(200)
          expect(yield* available(a.fingerprint)).toBe(500)

          // charge.refunded names no refund: the processor's list of refunds decides.
          yield* driver.refund(a.sessionId)
          expect((yield* driver.deliver(yield* driver.event("chargeRefunded", a.sessionId))).status).toBe(200)
          expect(yield* stateOf(a.fingerprint, a.orderId)).toBe("reversed")
          expect(yield* auditLedger).toEqual([])
        }))
    })
  })
