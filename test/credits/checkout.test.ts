// Stripe itself: what the real SDK sends for a checkout (amount, tax, metadata) and how a lost create is replayed.
// Processor-independent order behaviour is in processorSuite.ts, run against Stripe and the in-memory processor.
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { Checkout } from "../../src/credits/Checkout.ts"
import { creditsWithFake, Fake, freshKey, newOrderId, pinClocks, PUBLIC_BASE_URL, sessionOf } from "./support.ts"

describe("checkout orders", () => {
  it.layer(creditsWithFake())("with the Stripe SDK against the fake Stripe API", (it) => {
    it.effect("creates a hosted checkout whose amount, tax and metadata can be verified", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const checkout = yield* Checkout
        yield* pinClocks
        const { fingerprint } = yield* freshKey
        const orderId = newOrderId()
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

  })
})
