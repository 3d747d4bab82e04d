/** Chooses how a request is paid: a Bearer key goes to card credits, a PAYMENT-SIGNATURE to x402. */
import { Effect, Layer, Option } from "effect"
import { InvalidRequest, type PaymentRequired, type ServiceUnavailable, type Unauthorized } from "../domain/errors.ts"
import type { FundingKind } from "../domain/payer.ts"
import { Funding, type FundingMethod } from "./Funding.ts"

/** One way of paying, as the credits and x402 features implement it. */
export interface PaymentPath<E> {
  readonly identify: (headerValue: string) => Effect.Effect<FundingMethod, E>
  readonly abandon: (requestId: string) => Effect.Effect<void>
  readonly releaseOrphans: (olderThan: Date) => Effect.Effect<void>
}

export interface PaymentPaths {
  readonly credit: PaymentPath<Unauthorized | ServiceUnavailable>
  readonly x402: PaymentPath<PaymentRequired | ServiceUnavailable> & {
    /** The 402 answer for a request without funding. */
    readonly challenge: Effect.Effect<never, PaymentRequired>
    /** A 402 with this code that also carries the x402 challenge, so the caller may pay per call instead. */
    readonly challengeWith: (code: "insufficient_credits", message: string) => Effect.Effect<never, PaymentRequired>
  }
}

const bothSent = new InvalidRequest({
  error: { code: "invalid_request", message: "send either Authorization (credits) or PAYMENT-SIGNATURE (x402), not both" }
})

export const fundingRouter = (paths: PaymentPaths) => {
  /** A key out of credits is told it may pay per call (CONTRACT: 402 insufficient_credits with the challenge). */
  const offerX402 = (method: FundingMethod): FundingMethod => ({
    ...method,
    reserve: (requestId) =>
      Effect.catchIf(
        method.reserve(requestId),
        (error): error is PaymentRequired => error._tag === "PaymentRequired" && error.error.code === "insufficient_credits",
        (error) => paths.x402.challengeWith("insufficient_credits", error.error.message)
      )
  })

  return Funding.of({
    identify: ({ authorization, paymentSignature }) => {
      if (Option.isSome(authorization) && Option.isSome(paymentSignature)) return Effect.fail(bothSent)
      if (Option.isSome(authorization)) return Effect.asSome(Effect.map(paths.credit.identify(authorization.value), offerX402))
      if (Option.isSome(paymentSignature)) return Effect.asSome(paths.x402.identify(paymentSignature.value))
      return Effect.succeedNone
    },
    challenge: paths.x402.challenge,
    abandon: (requestId: string, kind: FundingKind) => paths[kind].abandon(requestId),
    releaseOrphans: (olderThan) =>
      Effect.zipRight(paths.credit.releaseOrphans(olderThan), paths.x402.releaseOrphans(olderThan))
  })
}

export const FundingRouterLive = <R, E>(paths: Effect.Effect<PaymentPaths, E, R>) => Layer.effect(Funding, Effect.map(paths, fundingRouter))
