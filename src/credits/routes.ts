/** Raw routes of the credits feature: the Stripe webhook (signature on the raw body) and the checkout return pages. */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Option } from "effect"
import type Stripe from "stripe"
import { Checkout } from "./Checkout.ts"
import { Processor } from "./Processor.ts"

const json = (status: number, body: unknown) => HttpServerResponse.unsafeJson(body, { status })

/** Refund states that undo a payment; a failed or canceled refund leaves the order paid. */
const refundTakesEffect = (status: string | null) => status !== "failed" && status !== "canceled"

const idOf = (ref: string | { readonly id: string } | null): string | null => (ref === null ? null : typeof ref === "string" ? ref : ref.id)

/**
 * Applies one verified event. Webhooks are at-least-once and unordered: every branch is idempotent, and a
 * grant or reversal goes through the ledger's unique constraints, so replays and races change nothing twice.
 */
export const applyEvent = (checkout: Checkout, event: Stripe.Event) =>
  Effect.gen(function* () {
    /** A refund or dispute of a payment reverses its order, found through the payment intent or metadata. */
    const reverse = (
      object: { readonly payment_intent: string | { readonly id: string } | null; readonly metadata: Stripe.Metadata | null },
      reason: "refund" | "dispute"
    ) =>
      checkout.reverseForPayment({ paymentIntentId: idOf(object.payment_intent), metadata: object.metadata ?? {}, reason, eventId: event.id })

    switch (event.type) {
      case "checkout.session.completed": {
        const session = event.data.object
        if (session.payment_status === "paid") return yield* checkout.fulfilSession(session.id, Option.none())
        // Delayed methods complete unpaid; async_payment_succeeded decides later.
        if (session.client_reference_id !== null) yield* checkout.rememberSession(session.client_reference_id, session.id)
        return "awaiting_payment"
      }
      case "checkout.session.async_payment_succeeded":
        return yield* checkout.fulfilSession(event.data.object.id, Option.none())
      case "checkout.session.async_payment_failed":
      case "checkout.session.expired": {
        const ended = yield* checkout.sessionEnded(event.data.object.id, event.data.object.client_reference_id)
        return ended ? "order_ended" : "unknown_order"
      }
      case "charge.refunded":
        return yield* reverse(event.data.object, "refund")
      case "refund.created":
      case "refund.updated":
        return refundTakesEffect(event.data.object.status) ? yield* reverse(event.data.object, "refund") : "ignored"
      case "charge.dispute.created":
        return yield* reverse(event.data.object, "dispute")
      default:
        return "ignored"
    }
  })

/**
 * `POST /webhooks/stripe`: 400 on a bad signature, 503 when payments are not configured, 500 when storage or
 * the processor failed (Stripe redelivers), otherwise 200 — unknown orders included, logged.
 */
export const StripeWebhookRoute = HttpLayerRouter.use((router) =>
  Effect.gen(function* () {
    const checkout = yield* Checkout
    const processor = yield* Processor
    yield* router.add("POST", "/webhooks/stripe", (request) =>
      Effect.gen(function* () {
        if (Option.isNone(processor)) {
          return json(503, { error: { code: "payments_unavailable", message: "Card payments are not configured on this server." } })
        }
        const body = yield* request.text.pipe(Effect.option)
        const signature = request.headers["stripe-signature"]
        if (Option.isNone(body) || signature === undefined) {
          return json(400, { error: { code: "invalid_signature", message: "Missing body or Stripe-Signature header." } })
        }
        const receivedAt = yield* Clock.currentTimeMillis
        const event = yield* processor.value.verifyEvent(body.value, signature, receivedAt).pipe(Effect.either)
        if (event._tag === "Left") {
          yield* Effect.logWarning("webhook with an invalid signature refused")
          return json(400, { error: { code: "invalid_signature", message: "The Stripe-Signature header does not verify." } })
        }
        return yield* applyEvent(checkout, event.right).pipe(
          Effect.tap((outcome) => Effect.logInfo("stripe webhook applied", { event_id: event.right.id, type: event.right.type, outcome })),
          Effect.as(json(200, { received: true })),
          Effect.catchAll((error) =>
            Effect.logError("stripe webhook failed; the processor will redeliver", { event_id: event.right.id, error }).pipe(
              Effect.as(json(500, { error: { code: "webhook_failed", message: "Temporary failure; redeliver." } }))
            )
          )
        )
      })
    )
  })
)

/** Every raw route of the credits feature. */
export const CreditsRoutes = StripeWebhookRoute
