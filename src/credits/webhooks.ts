/**
 * Webhook events of the card processor: the signature check, the events that move orders, and what each does.
 * Stripe's deliveries and the in-memory processor's internal ones go through the same `receive`.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { Checkout } from "./Checkout.ts"
import type { ReversalCause } from "./Ledger.ts"
import { Processor } from "./Processor.ts"

const Ref = Schema.optionalWith(Schema.NullOr(Schema.Union(Schema.String, Schema.Struct({ id: Schema.String }))), {
  default: () => null
})
const NullableString = Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })

const SessionObject = Schema.Struct({ id: Schema.String, payment_status: Schema.String, client_reference_id: NullableString })

/** A charge, refund or dispute: whatever names a payment and has a status. */
const PaymentObject = Schema.Struct({
  id: Schema.String,
  status: NullableString,
  payment_intent: Ref,
  metadata: Schema.optionalWith(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })), { default: () => null })
})

const Envelope = Schema.Struct({ id: Schema.String, type: Schema.String, data: Schema.Struct({ object: Schema.Unknown }) })

const idOf = (ref: string | { readonly id: string } | null): string | null => (ref === null ? null : typeof ref === "string" ? ref : ref.id)

/**
 * A refund keeps its order reversed while pending or succeeded; failed or canceled, it gives the money back to
 * nobody and the reversal is undone. Stages only grow (a succeeded refund can still fail; a failed one stays so).
 */
export const refundCause = (id: string, status: string | null): ReversalCause => {
  switch (status) {
    case "succeeded":
      return { id, kind: "refund", status, stage: 2, reverses: true }
    case "failed":
    case "canceled":
      return { id, kind: "refund", status, stage: 3, reverses: false }
    default:
      return { id, kind: "refund", status: status ?? "pending", stage: 1, reverses: true }
  }
}

/**
 * An open or lost dispute keeps its order reversed; one won by the merchant (or an inquiry closed, or a dispute
 * prevented) undoes the reversal. A lost dispute may be appealed and then won, so appeals rank between the two.
 */
export const disputeCause = (id: string, status: string | null): ReversalCause => {
  switch (status) {
    case "lost":
      return { id, kind: "dispute", status, stage: 2, reverses: true }
    case "appeal_needs_response":
    case "appeal_under_review":
      return { id, kind: "dispute", status, stage: 3, reverses: true }
    case "won":
    case "warning_closed":
    case "prevented":
      return { id, kind: "dispute", status, stage: 4, reverses: false }
    default:
      return { id, kind: "dispute", status: status ?? "needs_response", stage: 1, reverses: true }
  }
}

const REFUND_EVENTS = new Set(["refund.created", "refund.updated", "refund.failed", "charge.refund.updated"])
const DISPUTE_EVENTS = new Set([
  "charge.dispute.created",
  "charge.dispute.updated",
  "charge.dispute.closed",
  "charge.dispute.funds_withdrawn",
  "charge.dispute.funds_reinstated"
])

export interface WebhookAnswer {
  readonly status: number
  readonly body: unknown
  /** Seconds, on a temporary failure: the processor redelivers anyway; people and proxies read it too. */
  readonly retryAfter?: number
}

const answer = (status: number, code: string, message: string): WebhookAnswer => ({ status, body: { error: { code, message } } })

export class Webhooks extends Context.Tag("morsel/credits/Webhooks")<
  Webhooks,
  {
    /** One delivery with its raw body and Stripe-Signature header; the answer the processor gets back. */
    readonly receive: (rawBody: Option.Option<string>, signature: string | undefined) => Effect.Effect<WebhookAnswer>
  }
>() {}

export const WebhooksLive = Layer.effect(
  Webhooks,
  Effect.gen(function* () {
    const checkout = yield* Checkout
    const processor = yield* Processor

    const payment = (object: unknown) =>
      Effect.map(Schema.decodeUnknown(PaymentObject)(object), (p) => ({
        p,
        paymentIntentId: idOf(p.payment_intent),
        metadata: p.metadata ?? {}
      }))

    /**
     * Applies one verified event. Webhooks are at-least-once and unordered: every branch is idempotent, grants
     * go through the ledger's unique constraints, and refund or dispute statuses only move forward, so replays,
     * races and late deliveries change nothing twice.
     */
    const apply = (event: typeof Envelope.Type) =>
      Effect.gen(function* () {
        const object = event.data.object
        switch (event.type) {
          case "checkout.session.completed": {
            const session = yield* Schema.decodeUnknown(SessionObject)(object)
            if (session.payment_status === "paid") return yield* checkout.fulfilSession(session.id, Option.none())
            // Delayed methods complete unpaid; async_payment_succeeded decides later.
            if (session.client_reference_id !== null) yield* checkout.rememberSession(session.client_reference_id, session.id)
            return "awaiting_payment"
          }
          case "checkout.session.async_payment_succeeded":
            return yield* checkout.fulfilSession((yield* Schema.decodeUnknown(SessionObject)(object)).id, Option.none())
          case "checkout.session.async_payment_failed":
          case "checkout.session.expired": {
            const session = yield* Schema.decodeUnknown(SessionObject)(object)
            return (yield* checkout.sessionEnded(session.id, session.client_reference_id)) ? "order_ended" : "unknown_order"
          }
          case "charge.refunded": {
            // The charge names no refund: read the payment's refunds as they stand now.
            const { p, paymentIntentId, metadata } = yield* payment(object)
            if (paymentIntentId === null) return "unknown_order"
            const refunds = yield* processor.refundsOfPayment(paymentIntentId)
            if (refunds.length === 0) yield* Effect.logWarning("charge refunded without a listed refund", { charge: p.id })
            const causes = refunds.map((r) => refundCause(r.id, r.status))
            return yield* checkout.applyReversalCauses({ paymentIntentId, metadata, causes, eventId: event.id })
          }
          default: {
            const isRefund = REFUND_EVENTS.has(event.type)
            if (!isRefund && !DISPUTE_EVENTS.has(event.type)) return "ignored"
            const { p, paymentIntentId, metadata } = yield* payment(object)
            const cause = isRefund ? refundCause(p.id, p.status) : disputeCause(p.id, p.status)
            return yield* checkout.applyReversalCauses({ paymentIntentId, metadata, causes: [cause], eventId: event.id })
          }
        }
      })

    /**
     * One delivery: 400 on a bad signature, 503 when payments are not configured, 500 when storage or the
     * processor failed (the processor redelivers), otherwise 200 — unknown orders included, logged.
     */
    const receive = (rawBody: Option.Option<string>, signature: string | undefined): Effect.Effect<WebhookAnswer> =>
      Effect.gen(function* () {
        if (!processor.enabled) return answer(503, "payments_unavailable", "card payments are not configured on this server (STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET)")
        if (Option.isNone(rawBody) || signature === undefined) {
          return answer(400, "invalid_signature", "Missing body or Stripe-Signature header.")
        }
        const receivedAt = yield* Clock.currentTimeMillis
        const verified = yield* processor.verifyEvent(rawBody.value, signature, receivedAt).pipe(Effect.either)
        if (verified._tag === "Left") {
          yield* Effect.logWarning("webhook with an invalid signature refused")
          return answer(400, "invalid_signature", "The Stripe-Signature header does not verify.")
        }
        const event = Schema.decodeUnknownOption(Envelope)(verified.right)
        if (Option.isNone(event)) {
          yield* Effect.logError("signed webhook without an event envelope acknowledged")
          return { status: 200, body: { received: true } }
        }
        const { id, type } = event.value
        return yield* apply(event.value).pipe(
          Effect.tap((outcome) => Effect.logInfo("stripe webhook applied", { event_id: id, type, outcome })),
          Effect.as<WebhookAnswer>({ status: 200, body: { received: true } }),
          // A signed event we cannot read would fail the same way on every redelivery.
          Effect.catchTag("ParseError", (error) =>
            Effect.logError("signed webhook with an unreadable object acknowledged", { event_id: id, type, error: error.message }).pipe(
              Effect.as<WebhookAnswer>({ status: 200, body: { received: true } })
            )
          ),
          Effect.catchAll((error) =>
            Effect.logError("stripe webhook failed; the processor will redeliver", { event_id: id, type, error }).pipe(
              // Storage or the processor is away for a while: unavailable, not a crash of ours.
              Effect.as({ ...answer(503, "webhook_failed", "Temporary failure; redeliver."), retryAfter: 5 })
            )
          )
        )
      })

    return Webhooks.of({ receive })
  })
)
