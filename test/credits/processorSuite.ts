/**
 * The card processor seam's behaviour: one suite, run against each implementation (processorMemory.test.ts and
 * processorStripe.test.ts, one file each so their layers never mix). Orders, listing, confirm and webhooks alike.
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { Checkout } from "../../src/credits/Checkout.ts"
import { Driver, type UnderTest } from "./drivers.ts"
import { everyOrder } from "./reversalOrders.ts"
import { auditLedger, available, errorCodeOf, freshKey, newOrderId, PUBLIC_BASE_URL, sessionOf, stateOf } from "./support.ts"

const HOUR = 3600 * 1000

/** A fresh key's order whose session create failed at the processor: stored, unresolved. */
const unresolvedOrder = Effect.gen(function* () {
  const driver = yield* Driver
  const checkout = yield* Checkout
  const { fingerprint } = yield* freshKey
  const orderId = newOrderId()
  driver.failCalls(1)
  expect(yield* errorCodeOf(checkout.checkout(fingerprint, orderId, Option.none()))).toBe("processor_unavailable")
  expect(yield* stateOf(fingerprint, orderId)).toBe("unresolved")
  return { fingerprint, orderId }
})

/** A fresh key with an open checkout. */
const openOrder = Effect.gen(function* () {
  const checkout = yield* Checkout
  const { fingerprint } = yield* freshKey
  const orderId = newOrderId()
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
          const next = newOrderId()
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

      it.effect("a new explicit order only after paid, expired or not_issued", () =>
        Effect.gen(function* () {
          const driver = yield* Driver
          const checkout = yield* Checkout
          yield* driver.pinClock
          const { fingerprint } = yield* freshKey
          const first = newOrderId()
          const s1 = sessionOf(yield* checkout.checkout(fingerprint, first, Option.none()))
          expect(yield* errorCodeOf(checkout.checkout(fingerprint, newOrderId(), Option.none()))).toBe("order_conflict")
          driver.expire(s1.sessionId)
          expect(yield* stateOf(fingerprint, first)).toBe("expired")
          // The expired order itself cannot be revived; a new one can be made.
          expect(yield* errorCodeOf(checkout.checkout(fingerprint, first, Option.none()))).toBe("order_conflict")
          const second = newOrderId()
          const s2 = sessionOf(yield* checkout.checkout(fingerprint, second, Option.none()))
          driver.pay(s2.sessionId)
          // The pending order is read from the processor before the new one is allowed: paid → allowed.
          const third = newOrderId()
          sessionOf(yield* checkout.checkout(fingerprint, third, Option.none()))
          expect(yield* stateOf(fingerprint, second)).toBe("paid")
          expect(yield* stateOf(fingerprint, third)).toBe("open")
        }))

      it.effect("another key's order: 404 on checkout-status, 409 on checkout, 409 on confirm", () =>
        Effect.gen(function* () {
          const driver = yield* Driver
          const checkout = yield* Checkout
          yield* driver.pinClock
          const owner = yield* freshKey
          const other = yield* freshKey
          const orderId = newOrderId()
          const s = sessionOf(yield* checkout.checkout(owner.fingerprint, orderId, Option.none()))
          expect(yield* errorCodeOf(checkout.status(other.fingerprint, orderId))).toBe("order_not_found")
          expect(yield* errorCodeOf(checkout.status(owner.fingerprint, newOrderId()))).toBe("order_not_found")
          expect(yield* errorCodeOf(checkout.checkout(other.fingerprint, orderId, Option.none()))).toBe("order_conflict")
          expect(yield* errorCodeOf(checkout.confirm(owner.fingerprint, s.sessionId))).toBe("payment_unconfirmed")
          driver.pay(s.sessionId)
          expect(yield* errorCodeOf(checkout.confirm(other.fingerprint, s.sessionId))).toBe("payment_unconfirmed")
          expect(yield* errorCodeOf(checkout.confirm(owner.fingerprint, "cs_test_doesnotexist"))).toBe("payment_unconfirmed")
          expect(yield* checkout.confirm(owner.fingerprint, s.sessionId)).toBe("granted")
          expect(yield* available(owner.fingerprint)).toBe(500)
        }))

      it.effect("a lost session is found by listing; without one the order is unresolved until 48 h and a complete empty listing", () =>
        Effect.gen(function* () {
          const driver = yield* Driver
          const checkout = yield* Checkout
          const sql = yield* SqlClient.SqlClient
          yield* driver.pinClock
          // The processor is down: the order is stored, its session never created.
          const { fingerprint, orderId } = yield* unresolvedOrder
          // Another order is refused while this one is unresolved.
          expect(yield* errorCodeOf(checkout.checkout(fingerprint, newOrderId(), Option.none()))).toBe("order_conflict")
          yield* driver.advance(47 * HOUR)
          expect(yield* stateOf(fingerprint, orderId)).toBe("unresolved")
          yield* driver.advance(1 * HOUR)
          expect(yield* stateOf(fingerprint, orderId)).toBe("not_issued")
          expect(yield* stateOf(fingerprint, orderId)).toBe("not_issued")

          // A created session whose answer was lost is found by the listing (on page 4 behind 350 newer ones).
          const next = newOrderId()
          const s = sessionOf(yield* checkout.checkout(fingerprint, next, Option.none()))
          yield* sql`UPDATE credit_orders SET session_id = NULL, checkout_url = NULL WHERE order_id = ${next}`
          yield* driver.seedSessions(350)
          const listed = driver.listCalls()
          expect(yield* stateOf(fingerprint, next)).toBe("open")
          expect(driver.listCalls() - listed).toBe(4)
          const [row] = yield* sql<{ session_id: string | null }>`SELECT session_id FROM credit_orders WHERE order_id = ${next}`
          expect(row?.session_id).toBe(s.sessionId)
        }))

      it.effect("a listing longer than five pages is never complete: unresolved even after 48 h", () =>
        Effect.gen(function* () {
          const driver = yield* Driver
          yield* driver.pinClock
          const { fingerprint, orderId } = yield* unresolvedOrder
          yield* driver.seedSessions(550)
          yield* driver.advance(49 * HOUR)
          const listed = driver.listCalls()
          expect(yield* stateOf(fingerprint, orderId)).toBe("unresolved")
          expect(driver.listCalls() - listed).toBe(5)

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
