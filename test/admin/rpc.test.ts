// The admin RPC at POST /admin/rpc end to end: the whole server, the typed RPC client over HTTP, the fake Stripe and
// the fake model, on a real database (PostgreSQL when TEST_DATABASE_URL is set).
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Redacted } from "effect"
import { makeAdminClient } from "../../src/admin/client.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { balanceOf, fakeStripe, rest } from "../support/clients.ts"
import { TestDatabase } from "../support/database.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { errorCode, isRecord, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const TOKEN = "admin-token-for-tests-0123456789"
const photo = await makeImage(320, 240, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }
/** One RPC request as the JSON serialization sends it. */
const countersCall = { _tag: "Request", id: "1", tag: "Counters", payload: null, headers: [] }

const setup = (env: Record<string, string> = { ADMIN_TOKEN: TOKEN }) =>
  Effect.gen(function* () {
    const stripe = yield* fakeStripe
    const fake = yield* startFakeOpenAI()
    fake.setFallback(Reply.answer(chickenRice))
    const database = yield* Layer.build(TestDatabase.pipe(Layer.orDie))
    const { url } = yield* startServer({
      env: { ...stripe.env, OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url, ...env },
      dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited),
      database: Layer.succeedContext(database)
    })
    const admin = yield* makeAdminClient(url, Redacted.make(TOKEN))
    const analyze = (key: string, idempotencyKey: string) => rest(url, "/v1/analyze", key, body, { "idempotency-key": idempotencyKey })
    /** Checkout, pay and confirm one pack; returns the session to refund later. */
    const buyPack = (key: string) =>
      Effect.gen(function* () {
        const checkout = yield* rest(url, "/v1/credits/checkout", key, { order_id: crypto.randomUUID() })
        const sessionId = isRecord(checkout.body) ? String(checkout.body["session_id"]) : ""
        stripe.pay(sessionId)
        expect((yield* rest(url, "/v1/credits/confirm", key, { session_id: sessionId })).status).toBe(200)
        return sessionId
      })
    const refund = (sessionId: string) =>
      Effect.promise(() => stripe.sendWebhook(`${url}/webhooks/stripe`, stripe.events.chargeRefunded(sessionId)))
    const sql = yield* Effect.provide(SqlClient.SqlClient, Layer.succeedContext(database))
    return { url, admin, analyze, buyPack, refund, sql }
  })

describe("admin RPC", () => {
  it.scopedLive("refuses a missing or wrong token with 401 in the usual error shape, and answers the right one", () =>
    Effect.gen(function* () {
      const { url, admin } = yield* setup()
      const missing = yield* Effect.promise(() => send(`${url}/admin/rpc`, { body: countersCall }))
      expect(missing.status).toBe(401)
      expect(missing.body).toEqual({ _tag: "Unauthorized", error: { code: "invalid_admin_token", message: expect.any(String) } })
      const wrong = yield* Effect.promise(() =>
        send(`${url}/admin/rpc`, { body: countersCall, headers: { authorization: `Bearer ${TOKEN}x` } })
      )
      expect(wrong.status).toBe(401)
      expect(errorCode(wrong)).toBe("invalid_admin_token")
      const right = yield* Effect.promise(() => send(`${url}/admin/rpc`, { body: countersCall, headers: { authorization: `Bearer ${TOKEN}` } }))
      expect(right.status).toBe(200)
      const wrongClient = yield* makeAdminClient(url, Redacted.make("not-the-token"))
      expect(Exit.isFailure(yield* Effect.exit(wrongClient.Counters()))).toBe(true)
      expect((yield* admin.Counters()).requests_last_24h).toEqual({ running: 0, paid: 0, failed: 0, payment_pending: 0 })
    }), 60_000)

  it.scopedLive("is absent (404) when ADMIN_TOKEN is unset", () =>
    Effect.gen(function* () {
      const { url } = yield* setup({})
      const answer = yield* Effect.promise(() => send(`${url}/admin/rpc`, { body: countersCall, headers: { authorization: `Bearer ${TOKEN}` } }))
      expect(answer.status).toBe(404)
      expect(errorCode(answer)).toBe("not_found")
    }), 60_000)

  it.scopedLive("lists a key paused by a refund, unblocks it by fingerprint, and the key spends again", () =>
    Effect.gen(function* () {
      const { admin, analyze, buyPack, refund, url } = yield* setup()
      const key = newCreditKey(true)
      const first = yield* buyPack(key)
      yield* buyPack(key)
      expect((yield* refund(first)).status).toBe(200)
      expect(yield* balanceOf(url, key)).toBe(500)
      expect(errorCode(yield* analyze(key, "paused-key-attempt-1"))).toBe("key_paused")

      const paused = yield* admin.ListPausedKeys()
      expect(paused).toHaveLength(1)
      const listed = paused[0]!
      expect(listed).toMatchObject({ available: 500, reserved: 0, reason: expect.any(String) })
      expect(listed.fingerprint_prefix).toMatch(/^[0-9a-f]{16}$/)
      expect(listed.reversed_order_ids).toHaveLength(1)
      expect(JSON.stringify(paused)).not.toContain(key.slice("morsel_test_".length))

      const unblocked = yield* admin.UnblockKey({ fingerprint: listed.fingerprint_prefix })
      expect(unblocked).toEqual({ fingerprint_prefix: listed.fingerprint_prefix, available: 500, was_blocked: true })
      expect(yield* admin.ListPausedKeys()).toEqual([])
      expect((yield* rest(url, "/v1/credits/balance", key)).body).toMatchObject({ credits_remaining: 500, blocked: false })
      expect((yield* analyze(key, "after-unblocking-001")).status).toBe(200)
      expect(yield* balanceOf(url, key)).toBe(499)
      // A second unblock changes nothing; an unknown fingerprint is not found.
      expect((yield* admin.UnblockKey({ fingerprint: listed.fingerprint_prefix })).was_blocked).toBe(false)
      const unknown = yield* Effect.flip(admin.UnblockKey({ fingerprint: "00000000" }))
      expect(unknown).toMatchObject({ _tag: "AdminFailure", code: "not_found" })
    }), 60_000)

  it.scopedLive("looks up a request by request_id without its result, and counts requests, credits and settlements", () =>
    Effect.gen(function* () {
      const { admin, analyze, buyPack } = yield* setup()
      const key = newCreditKey(true)
      yield* buyPack(key)
      const done = yield* analyze(key, "lookup-this-request1")
      expect(done.status).toBe(200)
      const requestId = isRecord(done.body) ? String(done.body["request_id"]) : ""
      yield* analyze(key, "lookup-this-request2")

      const found = yield* admin.LookupRequest({ request_id: requestId })
      expect(found).toMatchObject({
        request_id: requestId,
        status: "paid",
        payer_kind: "credit",
        failure_code: null,
        result_stored: true,
        payment: null
      })
      expect(found.payer).toMatch(/^key:[0-9a-f]{16}$/)
      expect(found.completed_at).not.toBeNull()
      expect(Object.keys(found)).not.toContain("result")
      const missing = yield* Effect.flip(admin.LookupRequest({ request_id: crypto.randomUUID() }))
      expect(missing).toMatchObject({ _tag: "AdminFailure", code: "not_found" })

      const counters = yield* admin.Counters()
      expect(counters.requests_last_24h).toEqual({ running: 0, paid: 2, failed: 0, payment_pending: 0 })
      expect(counters.credits).toEqual({ granted_last_24h: 500, consumed_last_24h: 2, granted_total: 500, consumed_total: 2 })
      expect(counters.x402).toEqual({ settled_last_24h: 0, settled_total: 0 })
    }), 60_000)

  it.scopedLive("lists payment_pending settlements with their payment, never the signed transfer; reconcile runs a pass", () =>
    Effect.gen(function* () {
      const { admin, sql } = yield* setup()
      const requestId = crypto.randomUUID()
      const at = new Date()
      const wallet = "0x1111111111111111111111111111111111111111"
      yield* sql`
        INSERT INTO analysis_requests (request_id, payer, idempotency_key, input_fingerprint, funding, status, lease_until, created_at, completed_at)
        VALUES (${requestId}, ${`wallet:${wallet}`}, 'pending-settlement-01', 'fp', 'x402', 'payment_pending', ${at}, ${at}, ${at})`
      yield* sql`
        INSERT INTO x402_payments (request_id, payer, asset, network, pay_to, amount, auth_nonce, authorization_digest, valid_before,
          state, settled_by, tx_hash, from_block, raw_transaction, payment_payload, attempts, created_at, updated_at)
        VALUES (${requestId}, ${wallet}, '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', 'eip155:8453',
          '0x2222222222222222222222222222222222222222', '10000', '0xabc', '0xdef', ${Math.floor(at.getTime() / 1000) + 600},
          'submitted', 'self', ${`0x${"a".repeat(64)}`}, 1, '0xSIGNEDTRANSFER', 'PAYLOAD-WITH-SIGNATURE', 1, ${at}, ${at})`.pipe(Effect.orDie)

      const pending = yield* admin.ListPendingSettlements()
      expect(pending).toHaveLength(1)
      expect(pending[0]).toMatchObject({
        request_id: requestId,
        payer: wallet,
        amount: "10000",
        network: "eip155:8453",
        payment_state: "submitted",
        tx_hash: `0x${"a".repeat(64)}`,
        attempts: 1
      })
      expect(JSON.stringify(pending)).not.toMatch(/SIGNEDTRANSFER|PAYLOAD-WITH-SIGNATURE/)
      expect(yield* admin.LookupRequest({ request_id: requestId })).toMatchObject({
        status: "payment_pending",
        payer_kind: "x402",
        payer: `wallet:${wallet}`,
        payment: { state: "submitted", tx_hash: `0x${"a".repeat(64)}` }
      })
      // x402 is off on this server: the pass finds nothing to do.
      expect(yield* admin.ReconcileNow()).toEqual({ examined: 0, settled: [], failed: [], still_pending: 0 })
    }), 60_000)
})
