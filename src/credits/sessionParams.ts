/** The pack's checkout: the session parameters saved with an order at its first attempt and sent unchanged on every retry. */
import { Schema } from "effect"

export const PACK_AMOUNT_CENTS = 500
export const PACK_CURRENCY = "usd"
/** Sessions live 23 h, inside Stripe's 24 h idempotency window, so every retry of a create is replayed. */
export const SESSION_LIFETIME_SECONDS = 23 * 3600

const OrderMetadata = Schema.Struct({ order_id: Schema.String, key_fingerprint: Schema.String })

export const SessionParams = Schema.Struct({
  mode: Schema.Literal("payment"),
  line_items: Schema.Tuple(
    Schema.Struct({
      quantity: Schema.Literal(1),
      price_data: Schema.Struct({
        currency: Schema.Literal(PACK_CURRENCY),
        unit_amount: Schema.Literal(PACK_AMOUNT_CENTS),
        tax_behavior: Schema.Literal("inclusive"),
        product_data: Schema.Struct({ name: Schema.String, description: Schema.String })
      })
    })
  ),
  automatic_tax: Schema.Struct({ enabled: Schema.Literal(true) }),
  allow_promotion_codes: Schema.Literal(false),
  adaptive_pricing: Schema.Struct({ enabled: Schema.Literal(false) }),
  client_reference_id: Schema.String,
  metadata: OrderMetadata,
  payment_intent_data: Schema.Struct({ metadata: OrderMetadata }),
  success_url: Schema.String,
  cancel_url: Schema.String,
  expires_at: Schema.Number
})
export type SessionParams = typeof SessionParams.Type

export const buildSessionParams = (input: {
  readonly orderId: string
  readonly fingerprint: string
  readonly publicBaseUrl: string
  readonly nowSeconds: number
}): SessionParams => {
  const metadata = { order_id: input.orderId, key_fingerprint: input.fingerprint }
  return {
    mode: "payment",
    line_items: [
      {
        quantity: 1,
        price_data: {
          currency: PACK_CURRENCY,
          unit_amount: PACK_AMOUNT_CENTS,
          tax_behavior: "inclusive",
          product_data: { name: "morsel credits: 500 scans", description: "500 successful food-photo analyses; credits do not expire" }
        }
      }
    ],
    automatic_tax: { enabled: true },
    allow_promotion_codes: false,
    adaptive_pricing: { enabled: false },
    client_reference_id: input.orderId,
    metadata,
    payment_intent_data: { metadata },
    success_url: `${input.publicBaseUrl}/checkout/success?order_id=${input.orderId}&session_id={CHECKOUT_SESSION_ID}`,
    cancel_url: `${input.publicBaseUrl}/checkout/cancel?order_id=${input.orderId}`,
    expires_at: input.nowSeconds + SESSION_LIFETIME_SECONDS
  }
}
