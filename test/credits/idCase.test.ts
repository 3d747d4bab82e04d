// UUIDs in any letter case (Swift's and .NET's upper case, hand-typed mixed case) are one id on every credit path,
// and orders whose processor records still carry the client's letter case are recovered.
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { payerIdOf } from "../../src/credits/keys.ts"
import { errorCode, isRecord } from "../support/http.ts"
import { api, auditLedger, balanceOf, CreditsServerLive, creditsWithFake, Fake, freshKey, seedAnalysisRequest, webhook } from "./support.ts"

const HOUR_S = 3600

/** Every other letter upper case: neither the lower nor the upper form. */
const mixedCase = (id: string) => [...id].map((c, i) => (i % 2 === 0 ? c.toUpperCase() : c)).join("")

const sessionIdOf = (body: unknown) => {
  if (!isRecord(body) || typeof body["session_id"] !== "string") throw new Error(`no session in ${JSON.stringify(body)}`)
  return body["session_id"]
}

/** A key with an open checkout made in lower case, whose processor record then says the id as a client once sent it. */
const stuckOrder = Effect.gen(function* () {
  const fake = yield* Fake
  const { key, fingerprint } = yield* freshKey
  const orderId = crypto.randomUUID()
  const sessionId = sessionIdOf((yield* api("/v1/credits/checkout", key, { order_id: orderId })).body)
  const session = fake.session(sessionId)
  const echoed = orderId.toUpperCase()
  session.client_reference_id = echoed
  session.metadata["order_id"] = echoed
  session.intent_metadata["order_id"] = echoed
  return { key, fingerprint, orderId, sessionId }
})

const serverWithFake = CreditsServerLive.pipe(Layer.provideMerge(creditsWithFake()))

describe("UUIDs in any letter case", () => {
  layer(serverWithFake, { excludeTestServices: true })("with the fake processor", (it) => {
    it.effect("an upper-case order_id buys a pack: checkout, retry, webhook, checkout-status, confirm, refund", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const { key } = yield* freshKey
        const orderId = crypto.randomUUID()
        const upper = orderId.toUpperCase()

        const first = yield* api("/v1/credits/checkout", key, { order_id: upper })
        expect(first.status).toBe(200)
        expect(first.body).toMatchObject({ order_id: orderId })
        const sessionId = sessionIdOf(first.body)
        // The processor is told the canonical id, so what it echoes back matches the order.
        expect(fake.session(sessionId)).toMatchObject({ client_reference_id: orderId, metadata: { order_id: orderId } })

        const retry = yield* api("/v1/credits/checkout", key, { order_id: mixedCase(orderId) })
        expect([retry.status, sessionIdOf(retry.body)]).toEqual([200, sessionId])

        fake.pay(sessionId)
        expect((yield* webhook(fake.events.completed(sessionId))).status).toBe(200)
        expect(yield* balanceOf(key)).toMatchObject({ credits_remaining: 500 })
        for (const asSent of [upper, mixedCase(orderId), orderId]) {
          const status = yield* api("/v1/credits/checkout-status", key, { order_id: asSent })
          expect([status.status, status.body]).toEqual([200, { order_id: orderId, state: "paid", credits_remaining: 500, blocked: false, test_mode: true }])
        }
        const again = yield* api("/v1/credits/checkout", key, { order_id: upper })
        expect(again.body).toEqual({ order_id: orderId, state: "paid", credits: 500, amount_usd: "5.00" })
        const confirmed = yield* api("/v1/credits/confirm", key, { session_id: sessionId })
        expect([confirmed.status, confirmed.body]).toEqual([200, { credits_remaining: 500, blocked: false, test_mode: true }])

        const refund = fake.refund(sessionId)
        expect((yield* webhook(fake.events.refundCreated(refund))).status).toBe(200)
        expect(yield* balanceOf(key)).toEqual({ credits_remaining: 0, blocked: true, test_mode: true })
        expect((yield* api("/v1/credits/checkout-status", key, { order_id: upper })).body).toMatchObject({ state: "reversed" })
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("a stuck order (the processor echoes the client's upper case) is granted by the webhook, confirm or checkout-status", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const byWebhook = yield* stuckOrder
        fake.pay(byWebhook.sessionId)
        expect((yield* webhook(fake.events.completed(byWebhook.sessionId))).status).toBe(200)
        expect(yield* balanceOf(byWebhook.key)).toMatchObject({ credits_remaining: 500 })

        const byConfirm = yield* stuckOrder
        fake.pay(byConfirm.sessionId)
        const confirmed = yield* api("/v1/credits/confirm", byConfirm.key, { session_id: byConfirm.sessionId })
        expect([confirmed.status, confirmed.body]).toEqual([200, { credits_remaining: 500, blocked: false, test_mode: true }])

        const byStatus = yield* stuckOrder
        fake.pay(byStatus.sessionId)
        const status = yield* api("/v1/credits/checkout-status", byStatus.key, { order_id: byStatus.orderId.toUpperCase() })
        expect(status.body).toMatchObject({ order_id: byStatus.orderId, state: "paid", credits_remaining: 500 })
        // The key can start its next order.
        const next = yield* api("/v1/credits/checkout", byStatus.key, { order_id: crypto.randomUUID() })
        expect(next.status).toBe(200)

        // A dispute names the order in the client's case too.
        expect((yield* webhook(fake.events.disputeCreated(fake.dispute(byStatus.sessionId)))).status).toBe(200)
        expect(yield* balanceOf(byStatus.key)).toEqual({ credits_remaining: 0, blocked: true, test_mode: true })
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("a stuck order whose create answer was lost is found by the listing, also after 48 h (never not_issued)", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const sql = yield* SqlClient.SqlClient
        const recent = yield* stuckOrder
        yield* sql`UPDATE credit_orders SET session_id = NULL, checkout_url = NULL WHERE order_id = ${recent.orderId}`
        fake.pay(recent.sessionId)
        const found = yield* api("/v1/credits/checkout-status", recent.key, { order_id: recent.orderId })
        expect(found.body).toMatchObject({ state: "paid", credits_remaining: 500 })

        const old = yield* stuckOrder
        const twoDaysAgo = new Date(Date.now() - 49 * HOUR_S * 1000)
        yield* sql`
          UPDATE credit_orders SET session_id = NULL, checkout_url = NULL, created_at = ${twoDaysAgo}, last_attempt_at = ${twoDaysAgo}
          WHERE order_id = ${old.orderId}`
        fake.session(old.sessionId).created -= 49 * HOUR_S
        fake.pay(old.sessionId)
        const status = yield* api("/v1/credits/checkout-status", old.key, { order_id: old.orderId.toUpperCase() })
        expect(status.body).toMatchObject({ state: "paid", credits_remaining: 500 })
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("an expired session of a stuck order ends it, so the key can order again", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const sql = yield* SqlClient.SqlClient
        const stuck = yield* stuckOrder
        yield* sql`UPDATE credit_orders SET session_id = NULL WHERE order_id = ${stuck.orderId}`
        fake.expire(stuck.sessionId)
        expect((yield* webhook(fake.events.expired(stuck.sessionId))).status).toBe(200)
        const [row] = yield* sql<{ state: string }>`SELECT state FROM credit_orders WHERE order_id = ${stuck.orderId}`
        expect(row?.state).toBe("expired")
      }))

    it.effect("feedback takes a request_id in any case and answers it in lower case; repeats in another case are duplicates", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const { key, fingerprint } = yield* freshKey
        const sessionId = sessionIdOf((yield* api("/v1/credits/checkout", key, { order_id: crypto.randomUUID() })).body)
        fake.pay(sessionId)
        const requestId = yield* seedAnalysisRequest({ payer: payerIdOf(fingerprint), status: "paid", createdAt: new Date() })
        const first = yield* api("/v1/credits/feedback", key, { request_id: requestId.toUpperCase(), category: "helpful" })
        expect([first.status, first.body]).toEqual([200, { recorded: true, duplicate: false, request_id: requestId }])
        const repeat = yield* api("/v1/credits/feedback", key, { request_id: mixedCase(requestId), category: "helpful" })
        expect(repeat.body).toEqual({ recorded: true, duplicate: true, request_id: requestId })
        const conflict = yield* api("/v1/credits/feedback", key, { request_id: requestId.toUpperCase(), category: "other" })
        expect([conflict.status, errorCode(conflict)]).toEqual([409, "feedback_conflict"])
      }))
  })
})
