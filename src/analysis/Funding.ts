/** The seam through which an analysis is paid for: the credential a request carries, the rails that take it, and Funding composed of them. */
import { Context, Data, Effect, Either, Option, Redacted } from "effect"
import {
  type Conflict,
  InvalidRequest,
  type PaymentRequired,
  type ServiceUnavailable,
  type TooManyRequests,
  type Unauthorized
} from "../domain/errors.ts"
import type { RequestId } from "../domain/ids.ts"
import type { FundingKind, Payer } from "../domain/payer.ts"

/** A payment as it arrived, read by the rail that takes it: text as a header carries it, or a JSON value as MCP's `_meta` does. */
export type PaymentProof = Data.TaggedEnum<{
  Encoded: { readonly text: string }
  Json: { readonly value: unknown }
}>
export const PaymentProof = Data.taggedEnum<PaymentProof>()

/** What a request carries to pay with, decoded once where it arrives (REST headers, MCP metadata). */
export type Credential = Data.TaggedEnum<{
  /** Nothing: the answer is the price challenge. */
  None: Record<never, never>
  /**
   * A credit key from `Authorization: Bearer <key>`; None when the header holds no Bearer key. `client` is the
   * address it came from as the per-address limits count it (src/request/clientAddress.ts): unknown keys spend its allowance.
   */
  Bearer: { readonly key: Option.Option<Redacted.Redacted<string>>; readonly client: string }
  /** A per-call payment, as it arrived. */
  Payment: { readonly payment: PaymentProof }
}>
export const Credential = Data.taggedEnum<Credential>()

export type BearerCredential = Data.TaggedEnum.Value<Credential, "Bearer">
export type PaymentCredential = Data.TaggedEnum.Value<Credential, "Payment">

/** The key of an `Authorization: Bearer <key>` header value (scheme case-insensitive), or None. */
export const bearerKey = (authorization: string): Option.Option<Redacted.Redacted<string>> => {
  const match = /^Bearer +(\S+)\s*$/i.exec(authorization)
  return match?.[1] === undefined ? Option.none() : Option.some(Redacted.make(match[1]))
}

const bothSent = new InvalidRequest({
  error: { code: "invalid_request", message: "send either Authorization (credits) or PAYMENT-SIGNATURE (x402), not both" }
})

/** The credential of a request from its Authorization header and its payment, sent by `client`; a request is paid one way only. */
export const credentialOf = (
  authorization: Option.Option<string>,
  payment: Option.Option<PaymentProof>,
  client: string
): Either.Either<Credential, InvalidRequest> => {
  if (Option.isSome(authorization) && Option.isSome(payment)) return Either.left(bothSent)
  if (Option.isSome(authorization)) return Either.right(Credential.Bearer({ key: bearerKey(authorization.value), client }))
  if (Option.isSome(payment)) return Either.right(Credential.Payment({ payment: payment.value }))
  return Either.right(Credential.None())
}

/** What a completed payment hands back to the caller (x402: the PAYMENT-RESPONSE header value). */
export interface Settled {
  readonly paymentResponse: Option.Option<string>
}

/** How the analysis being paid for is saved; each method calls these in its own order. */
export interface Save {
  /** Save the result as awaiting its payment: done before a payment is submitted, so no paid result is lost. */
  readonly pending: Effect.Effect<void, ServiceUnavailable>
  /** Save the result as paid, with the receipt a replay hands back. */
  readonly complete: (paymentResponse: Option.Option<string>) => Effect.Effect<void, ServiceUnavailable>
  /** Record that the attempt failed with this code, nothing charged. */
  readonly failed: (code: string) => Effect.Effect<void>
}

export interface Reservation {
  /**
   * Consume the reserved credit or settle the payment, and save the validated result through `save`. On failure
   * the reservation is given back and the failure saved, except for a payment still pending on chain. A payment
   * that can no longer happen (the payer drained the wallet meanwhile) fails with PaymentRequired.
   */
  readonly settle: (save: Save) => Effect.Effect<Settled, PaymentRequired | ServiceUnavailable>
  /** Give back whatever was reserved; safe to call more than once. */
  readonly release: Effect.Effect<void>
}

export interface FundingMethod {
  readonly payer: Payer
  /**
   * Whether this method could pay for one analysis now (a key with a credit left and not paused; a payment the chain
   * would accept), reserving nothing: asked before work the service pays for itself, such as fetching a photo.
   */
  readonly ready: Effect.Effect<void, PaymentRequired | ServiceUnavailable>
  /** Reserve the price of one analysis for `requestId`; nothing is consumed yet. */
  readonly reserve: (requestId: RequestId) => Effect.Effect<Reservation, PaymentRequired | Conflict | ServiceUnavailable>
  /** Finish a payment left pending by an earlier attempt of the same request (x402 only), saving through `save`. */
  readonly resume: (requestId: RequestId, save: Save) => Effect.Effect<Settled, PaymentRequired | ServiceUnavailable>
}

/** One way of paying (card credits, x402): the credential it takes, and what it gives back when attempts vanish. */
export interface FundingRail<C extends Credential, E> {
  /** The method that pays with this credential, or why the credential cannot pay. */
  readonly identify: (credential: C) => Effect.Effect<FundingMethod, E>
  /** Give back the reservation of an attempt whose instance vanished mid-analysis; idempotent. */
  readonly abandon: (requestId: RequestId) => Effect.Effect<void>
  /** Give back reservations made before `olderThan` whose analysis is no longer running. */
  readonly releaseOrphans: (olderThan: Date) => Effect.Effect<void>
}

/** The 402 answers of a rail that offers a price to pay per call. */
export interface PriceChallenge {
  /** The 402 answer for a request that carries no funding (the challenge, or a refusal when the rail is off). */
  readonly challenge: Effect.Effect<never, PaymentRequired>
  /** A 402 with another code that still offers per-call payment when the rail is on. */
  readonly challengeWith: (code: "insufficient_credits" | "key_paused", message: string) => Effect.Effect<never, PaymentRequired>
}

export class Funding extends Context.Tag("morsel/Funding")<
  Funding,
  {
    /** The method that pays with a key or a payment (the sandbox refuses some pairings with InvalidRequest). */
    readonly identify: (
      credential: BearerCredential | PaymentCredential
    ) => Effect.Effect<FundingMethod, Unauthorized | TooManyRequests | PaymentRequired | InvalidRequest | ServiceUnavailable>
    /** The 402 answer for a request that carries no funding (x402 challenge, or x402 switched off). */
    readonly challenge: Effect.Effect<never, PaymentRequired>
    /** Give back the reservation of an attempt whose instance vanished mid-analysis; idempotent. */
    readonly abandon: (requestId: RequestId, kind: FundingKind) => Effect.Effect<void>
    /** Give back reservations made before `olderThan` whose analysis is no longer running. */
    readonly releaseOrphans: (olderThan: Date) => Effect.Effect<void>
  }
>() {}

/** Funding over its two rails: a Bearer key pays with card credits, a payment with x402. */
export const fundingOf = (rails: {
  readonly credit: FundingRail<BearerCredential, Unauthorized | TooManyRequests | ServiceUnavailable>
  readonly x402: FundingRail<PaymentCredential, PaymentRequired | ServiceUnavailable> & PriceChallenge
}) => {
  /** A key out of credits is told it may pay per call: 402 insufficient_credits carrying the x402 challenge. */
  const outOfCredits = (error: PaymentRequired | Conflict | ServiceUnavailable): error is PaymentRequired =>
    error._tag === "PaymentRequired" && error.error.code === "insufficient_credits"
  const offerX402 = (method: FundingMethod): FundingMethod => ({
    ...method,
    ready: Effect.catchIf(method.ready, outOfCredits, (error) => rails.x402.challengeWith("insufficient_credits", error.error.message)),
    reserve: (requestId) =>
      Effect.catchIf(method.reserve(requestId), outOfCredits, (error) => rails.x402.challengeWith("insufficient_credits", error.error.message))
  })

  return Funding.of({
    identify: (credential) =>
      credential._tag === "Bearer" ? Effect.map(rails.credit.identify(credential), offerX402) : rails.x402.identify(credential),
    challenge: rails.x402.challenge,
    abandon: (requestId, kind) => rails[kind].abandon(requestId),
    releaseOrphans: (olderThan) => Effect.zipRight(rails.credit.releaseOrphans(olderThan), rails.x402.releaseOrphans(olderThan))
  })
}
