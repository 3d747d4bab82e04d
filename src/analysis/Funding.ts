/** The seam through which an analysis is paid for: identify the payer, reserve, then commit or release. */
import { Context, type Effect, type Option } from "effect"
import type { Conflict, InvalidRequest, PaymentRequired, ServiceUnavailable, Unauthorized } from "../domain/errors.ts"
import type { FundingKind, Payer } from "../domain/payer.ts"


/** What a completed payment hands back to the caller (x402: the PAYMENT-RESPONSE header value). */
export interface Settled {
  readonly paymentResponse: Option.Option<string>
}

export interface Reservation {
  /**
   * Consume the reserved credit or settle the payment; only called with a validated result. A payment that can
   * no longer happen (the payer drained the wallet meanwhile) fails with PaymentRequired and nothing is served.
   */
  readonly commit: Effect.Effect<Settled, PaymentRequired | ServiceUnavailable>
  /** Give back whatever was reserved; safe to call more than once. */
  readonly release: Effect.Effect<void>
}

export interface FundingMethod {
  readonly payer: Payer
  /** Reserve the price of one analysis for `requestId`; nothing is consumed yet. */
  readonly reserve: (requestId: string) => Effect.Effect<Reservation, PaymentRequired | Conflict | ServiceUnavailable>
  /** Finish a payment left pending by an earlier attempt of the same request (x402 only). */
  readonly resume: (requestId: string) => Effect.Effect<Settled, PaymentRequired | ServiceUnavailable>
}

export interface Credentials {
  readonly authorization: Option.Option<string>
  readonly paymentSignature: Option.Option<string>
}

export class Funding extends Context.Tag("morsel/Funding")<
  Funding,
  {
    /** Resolve the request's credentials; None when it carries neither a Bearer key nor a payment. */
    readonly identify: (
      credentials: Credentials
    ) => Effect.Effect<Option.Option<FundingMethod>, Unauthorized | PaymentRequired | InvalidRequest | ServiceUnavailable>
    /** The 402 answer for a request that carries no funding (x402 challenge, or x402 switched off). */
    readonly challenge: Effect.Effect<never, PaymentRequired>
    /** Give back the reservation of an attempt whose instance vanished mid-analysis; idempotent. */
    readonly abandon: (requestId: string, kind: FundingKind) => Effect.Effect<void>
    /** Give back reservations made before `olderThan` whose analysis is no longer running. */
    readonly releaseOrphans: (olderThan: Date) => Effect.Effect<void>
  }
>() {}
