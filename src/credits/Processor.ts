/**
 * The card processor seam: checkout sessions, payments, refunds and signed webhook events. Three implementations
 * sit beside it: Stripe (ProcessorStripe.ts), an in-memory processor (ProcessorMemory.ts) and Disabled (here).
 */
import { Context, Data, Effect, Layer, type Option } from "effect"
import type { SessionParams } from "./sessionParams.ts"

/**
 * `unavailable`: retry later (network, 5xx, rate limit, auth); `not_found`: no such object; `rejected`: a 4xx;
 * `disabled`: no card processor on this server.
 */
export class ProcessorError extends Data.TaggedError("ProcessorError")<{
  readonly kind: "unavailable" | "not_found" | "rejected" | "disabled"
  readonly message: string
}> {}

export class InvalidSignature extends Data.TaggedError("InvalidSignature")<{ readonly message: string }> {}

/** The parts of a checkout session the credits feature reads. */
export interface ProcessorSession {
  readonly id: string
  readonly url: string | null
  /** open, complete or expired */
  readonly status: string | null
  /** paid, unpaid or no_payment_required */
  readonly paymentStatus: string
  readonly mode: string
  readonly amountTotal: number | null
  readonly currency: string | null
  readonly clientReferenceId: string | null
  readonly metadata: Readonly<Record<string, string>>
  readonly paymentIntentId: string | null
  /** Status of the payment intent, when there is one (async methods: processing, succeeded, …). */
  readonly paymentIntentStatus: string | null
  readonly created: number
}

export interface SessionPage {
  readonly sessions: ReadonlyArray<ProcessorSession>
  readonly hasMore: boolean
}

/** A refund of a payment as the processor reports it now (pending, requires_action, succeeded, failed, canceled). */
export interface ProcessorRefund {
  readonly id: string
  readonly status: string | null
}

export interface CardProcessor {
  /** False for the Disabled processor: every card-credit path answers 503 payments_unavailable. */
  readonly enabled: boolean
  readonly createSession: (params: SessionParams, idempotencyKey: string) => Effect.Effect<ProcessorSession, ProcessorError>
  readonly retrieveSession: (sessionId: string) => Effect.Effect<ProcessorSession, ProcessorError>
  /** One page of sessions created in [gte, lte] (unix seconds), newest first, 100 per page. */
  readonly listSessions: (range: {
    readonly gte: number
    readonly lte: number
    readonly startingAfter: Option.Option<string>
  }) => Effect.Effect<SessionPage, ProcessorError>
  readonly paymentIntentMetadata: (paymentIntentId: string) => Effect.Effect<Readonly<Record<string, string>>, ProcessorError>
  /** Every refund of a payment, as it stands now. */
  readonly refundsOfPayment: (paymentIntentId: string) => Effect.Effect<ReadonlyArray<ProcessorRefund>, ProcessorError>
  /** Verifies the `Stripe-Signature` header on the unparsed body and parses the event (Stripe's JSON shape). */
  readonly verifyEvent: (rawBody: string, signature: string, receivedAtMs: number) => Effect.Effect<unknown, InvalidSignature>
}

export class Processor extends Context.Tag("morsel/credits/Processor")<Processor, CardProcessor>() {}

const disabled = Effect.fail(new ProcessorError({ kind: "disabled", message: "Card payments are not configured on this server." }))

/** No card processor: card credits answer 503 payments_unavailable, webhooks 503. */
export const ProcessorDisabled = Layer.succeed(Processor, {
  enabled: false,
  createSession: () => disabled,
  retrieveSession: () => disabled,
  listSessions: () => disabled,
  paymentIntentMetadata: () => disabled,
  refundsOfPayment: () => disabled,
  verifyEvent: () => Effect.fail(new InvalidSignature({ message: "Card payments are not configured on this server." }))
})
