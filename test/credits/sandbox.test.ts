// The in-memory processor's own checkout over HTTP: the page, Pay (form or JSON), refund, and the orders they move.
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SandboxCheckoutRoutes } from "../../src/credits/layer.ts"
import { errorCode, isRecord, send } from "../support/http.ts"
import { creditsWithMemory } from "./drivers.ts"
import { auditLedger, CreditsServer, creditsServerWith, freshKey, PUBLIC_BASE_URL } from "./support.ts"

const call = (path: string, init: Parameters<typeof send>[1] = {}) =>
  Effect.flatMap(CreditsServer, ({ url }) => Effect.promise(() => send(`${url}${path}`, init)))

const api = (path: string, key: string, body?: unknown) =>
  call(path, { headers: { authorization: `Bearer ${key}` }, ...(body === undefined ? {} : { body }) })

/** A known key with an open sandbox checkout. */
const buyer = Effect.gen(function* () {
  const { key } = yield* freshKey
  const orderId = crypto.randomUUID()
  const answer = yield* api("/v1/credits/checkout", key, { order_id: orderId })
  const body = answer.body
  if (!isRecord(body) || typeof body["session_id"] !== "string" || typeof body["checkout_url"] !== "string") {
    throw new Error(`checkout failed: ${answer.text}`)
  }
  return { key, orderId, sessionId: body["session_id"], checkoutUrl: body["checkout_url"] }
})

describe("sandbox checkout", () => {
  layer(creditsServerWith(SandboxCheckoutRoutes).pipe(Layer.provideMerge(creditsWithMemory())), { excludeTestServices: true })(
    "on the in-memory processor",
    (it) => {
      it.effect("the page shows the order and pays with a form post, back to the return URL; credits arrive by webhook", () =>
        Effect.gen(function* () {
          const b = yield* buyer
          expect(b.sessionId).toMatch(/^cs_test_[0-9a-f]+$/)
          expect(b.checkoutUrl).toBe(`${PUBLIC_BASE_URL}/sandbox/checkout/${b.sessionId}`)
          const page = yield* call(`/sandbox/checkout/${b.sessionId}`)
          expect(page.status).toBe(200)
          expect(page.headers.get("content-type")).toMatch(/^text\/html/)
          expect(page.text).toContain('<html lang="en">')
          expect(page.text).toContain(b.orderId)
          expect(page.text).toContain("500 credits")
          expect(page.text).toContain("USD 5.00")
          expect(page.text).toContain(`<form method="post" action="/sandbox/checkout/${b.sessionId}/pay">`)
          expect(page.text).toMatch(/<button type="submit">Pay USD 5\.00<\/button>/)

          const { url } = yield* CreditsServer
          const posted = yield* Effect.promise(() =>
            fetch(`${url}/sandbox/checkout/${b.sessionId}/pay`, { method: "POST", headers: { accept: "text/html" }, redirect: "manual" })
          )
          expect(posted.status).toBe(303)
          expect(posted.headers.get("location")).toBe(`${PUBLIC_BASE_URL}/checkout/success?order_id=${b.orderId}&session_id=${b.sessionId}`)
          expect((yield* api("/v1/credits/balance", b.key)).body).toEqual({ credits_remaining: 500, blocked: false, test_mode: true })
          expect((yield* api("/v1/credits/checkout-status", b.key, { order_id: b.orderId })).body).toMatchObject({ state: "paid" })
          expect((yield* api("/v1/credits/confirm", b.key, { session_id: b.sessionId })).body).toMatchObject({ credits_remaining: 500 })

          const again = yield* call(`/sandbox/checkout/${b.sessionId}/pay`, { method: "POST" })
          expect([again.status, errorCode(again)]).toEqual([409, "session_not_open"])
          expect((yield* call(`/sandbox/checkout/${b.sessionId}`)).text).toContain("This checkout is complete and paid.")
        }))

      it.effect("pay answers JSON to other clients; refund reverses the order and pauses the key", () =>
        Effect.gen(function* () {
          const b = yield* buyer
          const early = yield* call(`/sandbox/checkout/${b.sessionId}/refund`, { method: "POST" })
          expect([early.status, errorCode(early)]).toEqual([409, "session_not_paid"])
          const paid = yield* call(`/sandbox/checkout/${b.sessionId}/pay`, { method: "POST" })
          expect([paid.status, paid.body]).toEqual([
            200,
            {
              session_id: b.sessionId,
              order_id: b.orderId,
              payment_status: "paid",
              return_url: `${PUBLIC_BASE_URL}/checkout/success?order_id=${b.orderId}&session_id=${b.sessionId}`
            }
          ])
          const refunded = yield* call(`/sandbox/checkout/${b.sessionId}/refund`, { method: "POST" })
          expect(refunded.status).toBe(200)
          expect(refunded.body).toMatchObject({ session_id: b.sessionId, order_id: b.orderId, refund_status: "succeeded" })
          expect((yield* api("/v1/credits/checkout-status", b.key, { order_id: b.orderId })).body).toMatchObject({
            state: "reversed",
            credits_remaining: 0,
            blocked: true
          })
          expect(yield* auditLedger).toEqual([])
        }))

      it.effect("unknown sessions: 404 page and 404 JSON", () =>
        Effect.gen(function* () {
          const page = yield* call("/sandbox/checkout/cs_test_unknown")
          expect(page.status).toBe(404)
          expect(page.text).toContain("Checkout not found")
          for (const action of ["pay", "refund"]) {
            const answer = yield* call(`/sandbox/checkout/cs_test_unknown/${action}`, { method: "POST" })
            expect([answer.status, errorCode(answer)]).toEqual([404, "session_not_found"])
          }
        }))
    }
  )
})
