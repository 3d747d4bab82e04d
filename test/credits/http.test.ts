import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { CreditFunding } from "../../src/credits/CreditFunding.ts"
import { newCreditKey, payerIdOf } from "../../src/credits/keys.ts"
import { realPostgresUrl } from "../support/database.ts"
import { errorCode, send } from "../support/http.ts"
import { api, auditLedger, balanceOf, buyer, CreditsServer, CreditsServerLive, creditsWithFake, creditsWithoutStripe, Fake, freshKey, seedAnalysisRequest, seedOrder, webhook } from "./support.ts"
import { bearerCredential, newRequestId, recordingSave, unsaved } from "../support/funding.ts"
import type { Save } from "../../src/analysis/Funding.ts"
import { storageUnavailable } from "../../src/db/storage.ts"

const DAY = 24 * 3600 * 1000

/** A key whose pack of 500 credits was paid and delivered by the webhook, with its credit funding method. */
const paidMethod = Effect.gen(function* () {
  const fake = yield* Fake
  const funding = yield* CreditFunding
  const b = yield* buyer
  fake.pay(b.sessionId)
  yield* webhook(fake.events.completed(b.sessionId))
  const method = yield* funding.identify(bearerCredential(`Bearer ${b.key}`))
  return { ...b, method }
})

const serverWithFake = (env: Readonly<Record<string, string>> = {}) => CreditsServerLive.pipe(Layer.provideMerge(creditsWithFake(env)))

describe("credits over HTTP", () => {
  // The server runs on the real clock: its request fibers must not see a test clock stopped at 1970.
  layer(serverWithFake({ LIMIT_FEEDBACK_PER_KEY_PER_DAY: "3", LIMIT_FEEDBACK_GLOBAL_PER_DAY: "5" }), { excludeTestServices: true })(
    "with the fake processor",
    (it) => {
    it.effect("keys: unknown until the first checkout, malformed or other-mode keys refused", () =>
      Effect.gen(function* () {
        const { key } = yield* freshKey
        const before = yield* api("/v1/credits/balance", key)
        expect([before.status, errorCode(before)]).toEqual([401, "invalid_key"])
        for (const bad of [newCreditKey(false), key.toUpperCase(), `${key}0`, "morsel_test_xyz", ""]) {
          const answer = yield* api("/v1/credits/balance", bad)
          expect([answer.status, errorCode(answer)]).toEqual([401, "invalid_key"])
        }
        const { url } = yield* CreditsServer
        const anonymous = yield* Effect.promise(() => send(`${url}/v1/credits/balance`))
        expect(anonymous.status).toBe(401)

        const checkout = yield* api("/v1/credits/checkout", key, { order_id: crypto.randomUUID(), context: { channel: "agent" } })
        expect(checkout.status).toBe(200)
        expect(checkout.body).toMatchObject({ credits: 500, amount_usd: "5.00" })
        expect(checkout.body).toHaveProperty("checkout_url")
        expect(yield* balanceOf(key)).toEqual({ credits_remaining: 0, blocked: false, test_mode: true })
      }))

    it.effect("checkout validates its body", () =>
      Effect.gen(function* () {
        const { key } = yield* freshKey
        for (const body of [{ order_id: "not-a-uuid" }, { order_id: crypto.randomUUID(), extra: 1 }, { order_id: crypto.randomUUID(), context: { channel: "tv" } }]) {
          expect((yield* api("/v1/credits/checkout", key, body)).status).toBe(400)
        }
      }))

    it.effect("webhook: signature checked on the raw body; paid checkout grants once, duplicates change nothing", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const b = yield* buyer
        fake.pay(b.sessionId)
        const event = fake.events.completed(b.sessionId)
        expect((yield* webhook(event, { secret: "whsec_wrong" })).status).toBe(400)
        const { url } = yield* CreditsServer
        const unsigned = yield* Effect.promise(() => send(`${url}/webhooks/stripe`, { body: event }))
        expect(unsigned.status).toBe(400)
        for (let i = 0; i < 3; i++) expect((yield* webhook(event)).status).toBe(200)
        expect((yield* webhook(fake.events.asyncSucceeded(b.sessionId))).status).toBe(200)
        expect(yield* balanceOf(b.key)).toEqual({ credits_remaining: 500, blocked: false, test_mode: true })
        const status = yield* api("/v1/credits/checkout-status", b.key, { order_id: b.orderId })
        expect(status.body).toEqual({ order_id: b.orderId, state: "paid", credits_remaining: 500, blocked: false, test_mode: true })
        const again = yield* api("/v1/credits/checkout", b.key, { order_id: b.orderId })
        expect(again.body).toEqual({ order_id: b.orderId, state: "paid", credits: 500, amount_usd: "5.00" })
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("webhook: events of unknown orders are acknowledged", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        fake.seedSessions(1)
        const [stranger] = [...fake.sessions.values()].slice(-1)
        if (stranger === undefined) throw new Error("no seeded session")
        fake.pay(stranger.id)
        expect((yield* webhook(fake.events.completed(stranger.id))).status).toBe(200)
        expect((yield* webhook(fake.events.chargeRefunded(stranger.id))).status).toBe(200)
      }))

    it.effect("delayed payment: completed unpaid grants nothing; async success grants; async failure ends the order", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const b = yield* buyer
        fake.payAsync(b.sessionId)
        expect((yield* webhook(fake.events.completed(b.sessionId))).status).toBe(200)
        expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 0 })
        expect((yield* api("/v1/credits/checkout-status", b.key, { order_id: b.orderId })).body).toMatchObject({ state: "open" })
        const unconfirmed = yield* api("/v1/credits/confirm", b.key, { session_id: b.sessionId })
        expect([unconfirmed.status, errorCode(unconfirmed)]).toEqual([409, "payment_unconfirmed"])
        fake.asyncSucceeds(b.sessionId)
        expect((yield* webhook(fake.events.asyncSucceeded(b.sessionId))).status).toBe(200)
        expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 500 })

        const c = yield* buyer
        fake.payAsync(c.sessionId)
        fake.asyncFails(c.sessionId)
        expect((yield* webhook(fake.events.asyncFailed(c.sessionId))).status).toBe(200)
        expect((yield* api("/v1/credits/checkout-status", c.key, { order_id: c.orderId })).body).toMatchObject({ state: "expired" })
        expect(yield* balanceOf(c.key)).toMatchObject({ credits_remaining: 0 })
      }))

    it.effect("confirm: only this mode's verified paid sessions of this key", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const b = yield* buyer
        const wrongMode = yield* api("/v1/credits/confirm", b.key, { session_id: "cs_live_abc123" })
        expect([wrongMode.status, errorCode(wrongMode)]).toEqual([400, "wrong_mode"])
        expect((yield* api("/v1/credits/confirm", b.key, { session_id: "not_a_session" })).status).toBe(400)
        fake.pay(b.sessionId)
        const confirmed = yield* api("/v1/credits/confirm", b.key, { session_id: b.sessionId })
        expect([confirmed.status, confirmed.body]).toEqual([200, { credits_remaining: 500, blocked: false, test_mode: true }])
        const twice = yield* api("/v1/credits/confirm", b.key, { session_id: b.sessionId })
        expect(twice.body).toMatchObject({ credits_remaining: 500 })
        expect((yield* webhook(fake.events.completed(b.sessionId))).status).toBe(200)
        expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 500 })
        const unknown = yield* freshKey
        expect((yield* api("/v1/credits/confirm", unknown.key, { session_id: b.sessionId })).status).toBe(401)
      }))

    it.effect("refund after credits were spent: balance below zero, key paused, no new reservation", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const { method, ...b } = yield* paidMethod
        expect(method.payer).toEqual({ kind: "credit", id: payerIdOf(b.fingerprint) })
        for (let i = 0; i < 3; i++) {
          const reservation = yield* method.reserve(newRequestId())
          yield* reservation.settle(unsaved)
        }
        const failed = yield* method.reserve(newRequestId())
        yield* failed.release
        yield* failed.release
        expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 497 })

        // A failed refund changes nothing; a succeeded one reverses the order once.
        expect((yield* webhook(fake.events.refundCreated(fake.refund(b.sessionId, "failed")))).status).toBe(200)
        expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 497, blocked: false })
        const refund = fake.refund(b.sessionId)
        expect((yield* webhook(fake.events.chargeRefunded(b.sessionId))).status).toBe(200)
        expect((yield* webhook(fake.events.refundCreated(refund))).status).toBe(200)
        expect((yield* webhook(fake.events.disputeCreated(fake.dispute(b.sessionId)))).status).toBe(200)
        expect(yield* balanceOf(b.key)).toEqual({ credits_remaining: 0, blocked: true, test_mode: true })
        const sql = yield* SqlClient.SqlClient
        const [account] = yield* sql<{ available: number }>`SELECT available FROM credit_accounts WHERE fingerprint = ${b.fingerprint}`
        expect(account?.available).toBe(-3)
        const refused = yield* Effect.either(method.reserve(newRequestId()))
        expect(Either.isLeft(refused) && refused.left.error.code).toBe("key_paused")
        const status = yield* api("/v1/credits/checkout-status", b.key, { order_id: b.orderId })
        expect(status.body).toMatchObject({ state: "reversed", credits_remaining: 0, blocked: true })
        expect((yield* api("/v1/credits/checkout", b.key, { order_id: b.orderId })).body).toMatchObject({ state: "reversed" })
        const newOrder = yield* api("/v1/credits/checkout", b.key, { order_id: crypto.randomUUID() })
        expect([newOrder.status, errorCode(newOrder)]).toEqual([409, "order_conflict"])
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("a dispute on a paid order reverses it and pauses the key", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const b = yield* buyer
        fake.pay(b.sessionId)
        yield* api("/v1/credits/confirm", b.key, { session_id: b.sessionId })
        expect((yield* webhook(fake.events.disputeCreated(fake.dispute(b.sessionId)))).status).toBe(200)
        expect(yield* balanceOf(b.key)).toEqual({ credits_remaining: 0, blocked: true, test_mode: true })
      }))

    it.effect("credit funding: unknown keys 401, insufficient credits 402, resume not applicable", () =>
      Effect.gen(function* () {
        const funding = yield* CreditFunding
        const stranger = yield* freshKey
        const unknown = yield* Effect.either(funding.identify(bearerCredential(`Bearer ${stranger.key}`)))
        expect(Either.isLeft(unknown) && unknown.left.error.code).toBe("invalid_key")
        const malformed = yield* Effect.either(funding.identify(bearerCredential("Basic abc")))
        expect(Either.isLeft(malformed) && malformed.left.error.code).toBe("invalid_key")
        const b = yield* buyer
        const method = yield* funding.identify(bearerCredential(`bearer ${b.key}`))
        const requestId = newRequestId()
        const empty = yield* Effect.either(method.reserve(requestId))
        expect(Either.isLeft(empty) && empty.left.error).toMatchObject({ code: "insufficient_credits", request_id: requestId })
        expect(Either.isLeft(yield* Effect.either(method.resume(requestId, unsaved)))).toBe(true)
      }))

    it.effect("a credit is consumed only with its saved result: a save that fails gives the credit back", () =>
      Effect.gen(function* () {
        const { method, ...b } = yield* paidMethod
        const failing = yield* recordingSave
        // The result is written, then its write fails: the consumption in the same transaction is undone with it.
        const unsavable: Save = { ...failing.save, complete: (receipt) => Effect.zipRight(failing.save.complete(receipt), Effect.fail(storageUnavailable())) }
        const refused = yield* Effect.flip(Effect.flatMap(method.reserve(newRequestId()), (r) => r.settle(unsavable)))
        expect(refused.error.code).toBe("storage_unavailable")
        expect(yield* failing.steps).toEqual(["complete", "failed:not_saved"])
        expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 500 })
        const saving = yield* recordingSave
        yield* Effect.flatMap(method.reserve(newRequestId()), (r) => r.settle(saving.save))
        expect(yield* saving.steps).toEqual(["complete"])
        expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 499 })
      }))

    it.effect("feedback: owned, completed, at most 90 days old; one per request; limits with Retry-After", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const sql = yield* SqlClient.SqlClient
        const b = yield* buyer
        fake.pay(b.sessionId)
        const now = Date.now()
        const payer = payerIdOf(b.fingerprint)
        const paid = yield* seedAnalysisRequest({ payer, status: "paid", createdAt: new Date(now - 1000) })
        const failed = yield* seedAnalysisRequest({ payer, status: "failed", createdAt: new Date(now - 89 * DAY) })
        const running = yield* seedAnalysisRequest({ payer, status: "running", createdAt: new Date(now) })
        const old = yield* seedAnalysisRequest({ payer, status: "paid", createdAt: new Date(now - 91 * DAY) })
        const other = yield* freshKey
        yield* seedOrder(other.fingerprint)
        const othersRequest = yield* seedAnalysisRequest({ payer: payerIdOf(other.fingerprint), status: "paid", createdAt: new Date(now) })

        const submit = (request_id: string, category: string, note?: string) =>
          api("/v1/credits/feedback", b.key, { request_id, category, ...(note === undefined ? {} : { note }) })

        // An expired feedback row is removed by the next eligible submission.
        yield* sql`
          INSERT INTO credit_feedback (request_id, fingerprint, category, note, created_at)
          VALUES (${crypto.randomUUID()}, ${b.fingerprint}, 'helpful', '', ${new Date(now - 91 * DAY)})`

        const first = yield* submit(paid, "wrong_portion", "rice was 200 g")
        expect([first.status, first.body]).toEqual([200, { recorded: true, duplicate: false, request_id: paid }])
        const repeat = yield* submit(paid, "wrong_portion", "rice was 200 g")
        expect(repeat.body).toEqual({ recorded: true, duplicate: true, request_id: paid })
        const different = yield* submit(paid, "helpful")
        expect([different.status, errorCode(different)]).toEqual([409, "feedback_conflict"])
        const [{ n } = { n: -1 }] = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM credit_feedback WHERE created_at < ${new Date(now - 90 * DAY)}`
        expect(n).toBe(0)

        for (const id of [running, old, othersRequest, crypto.randomUUID()]) {
          const answer = yield* submit(id, "helpful")
          expect([id, answer.status]).toEqual([id, 404])
        }
        expect((yield* submit(failed, "other", "x".repeat(501))).status).toBe(400)
        expect((yield* submit(failed, "bogus")).status).toBe(400)
        expect((yield* submit("nope", "helpful")).status).toBe(400)
        expect((yield* submit(failed, "integration_problem", "x".repeat(500))).status).toBe(200)

        // Per-key limit (3 here): the third fits, the fourth gets 429 with Retry-After; repeats stay idempotent.
        const third = yield* seedAnalysisRequest({ payer, status: "paid", createdAt: new Date(now) })
        expect((yield* submit(third, "helpful")).status).toBe(200)
        const fourth = yield* seedAnalysisRequest({ payer, status: "paid", createdAt: new Date(now) })
        const limited = yield* submit(fourth, "helpful")
        expect([limited.status, errorCode(limited)]).toEqual([429, "feedback_limited"])
        expect(limited.headers.get("retry-after")).toBe("60")
        expect((yield* submit(paid, "wrong_portion", "rice was 200 g")).body).toMatchObject({ duplicate: true })

        // Global limit (5 here): two more from another key fill it.
        const otherSubmit = (request_id: string) => api("/v1/credits/feedback", other.key, { request_id, category: "helpful" })
        expect((yield* otherSubmit(othersRequest)).status).toBe(200)
        const second = yield* seedAnalysisRequest({ payer: payerIdOf(other.fingerprint), status: "paid", createdAt: new Date(now) })
        expect((yield* otherSubmit(second)).status).toBe(200)
        const globalLimited = yield* otherSubmit(
          yield* seedAnalysisRequest({ payer: payerIdOf(other.fingerprint), status: "failed", createdAt: new Date(now) })
        )
        expect([globalLimited.status, errorCode(globalLimited)]).toEqual([429, "feedback_limited"])
        expect(Number(globalLimited.headers.get("retry-after"))).toBeGreaterThan(0)
        expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 0 })
      }))
    }
  )

  layer(CreditsServerLive.pipe(Layer.provideMerge(creditsWithoutStripe())), { excludeTestServices: true })("without a card processor", (it) => {
    it.effect("every card-credit endpoint answers 503 payments_unavailable", () =>
      Effect.gen(function* () {
        const { url } = yield* CreditsServer
        const { key, fingerprint } = yield* freshKey
        yield* seedOrder(fingerprint)
        for (const [path, body] of [
          ["/v1/credits/feedback", { request_id: crypto.randomUUID(), category: "helpful" }],
          ["/v1/credits/checkout", { order_id: crypto.randomUUID() }],
          ["/v1/credits/confirm", { session_id: "cs_live_abc" }],
          ["/v1/credits/checkout-status", { order_id: crypto.randomUUID() }]
        ] as const) {
          const answer = yield* api(path, key, body)
          expect([path, answer.status, errorCode(answer)]).toEqual([path, 503, "payments_unavailable"])
          // Not configured: retrying does not help until the operator sets it, so no Retry-After, and the setting is named.
          expect(answer.headers.get("retry-after")).toBeNull()
          expect(JSON.stringify(answer.body)).toContain("STRIPE_SECRET_KEY")
        }
        const balance = yield* Effect.promise(() => send(`${url}/v1/credits/balance`, { headers: { authorization: `Bearer ${key}` } }))
        expect([balance.status, errorCode(balance)]).toEqual([503, "payments_unavailable"])
        const hook = yield* Effect.promise(() => send(`${url}/webhooks/stripe`, { body: {}, headers: { "stripe-signature": "t=1,v1=x" } }))
        expect(hook.status).toBe(503)
      }))
  })
})

describe.skipIf(!realPostgresUrl)("credits over HTTP on real PostgreSQL (concurrency)", () => {
  layer(serverWithFake(), { excludeTestServices: true })("races", (it) => {
    it.effect("completed webhook ×5 concurrently with confirm ×5: one grant", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        for (let round = 0; round < 3; round++) {
          const b = yield* buyer
          fake.pay(b.sessionId)
          const event = fake.events.completed(b.sessionId)
          const answers = yield* Effect.all(
            [
              ...Array.from({ length: 5 }, () => webhook(event)),
              ...Array.from({ length: 5 }, () => api("/v1/credits/confirm", b.key, { session_id: b.sessionId }))
            ],
            { concurrency: "unbounded" }
          )
          expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200))
          expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 500 })
        }
        const sql = yield* SqlClient.SqlClient
        const [grants] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM credit_entries WHERE kind = 'grant'`
        expect(grants?.n).toBe(3)
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("50 concurrent credit-funded analyses against 10 credits: exactly 10 consume, balance 0", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const funding = yield* CreditFunding
        const b = yield* buyer
        fake.pay(b.sessionId)
        yield* api("/v1/credits/confirm", b.key, { session_id: b.sessionId })
        const method = yield* funding.identify(bearerCredential(`Bearer ${b.key}`))
        yield* Effect.forEach(
          Array.from({ length: 490 }, () => newRequestId()),
          (id) => Effect.flatMap(method.reserve(id), (r) => r.settle(unsaved)),
          { concurrency: 8 }
        )
        const analyses = yield* Effect.all(
          Array.from({ length: 50 }, () => Effect.either(Effect.flatMap(method.reserve(newRequestId()), (r) => r.settle(unsaved)))),
          { concurrency: "unbounded" }
        )
        expect(analyses.filter(Either.isRight)).toHaveLength(10)
        const refusals = analyses.flatMap((a) => (Either.isLeft(a) ? [a.left.error.code] : []))
        expect(refusals).toEqual(Array(40).fill("insufficient_credits"))
        expect(yield* balanceOf(b.key)).toMatchObject({ credits_remaining: 0, blocked: false })
        expect(yield* auditLedger).toEqual([])
      }), 60_000)
  })
})

if (!realPostgresUrl) {
  describe("credits over HTTP on real PostgreSQL (concurrency)", () => {
    it.skip("skipped: set TEST_DATABASE_URL=postgres://… to run the webhook/confirm and spending races on a real server", () => {})
  })
}
