/** Response headers that accompany answers: Retry-After on refusals, payment headers on x402 answers. */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import type { ServiceUnavailable, TooManyRequests } from "../domain/errors.ts"

export const setResponseHeader = (name: string, value: string) =>
  HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeader(response, name, value)))

/**
 * SPEC §7: 3600 s for failure_limit and spend_limited, otherwise 60 s; a hint, always whole seconds. None for a
 * part the operator has not configured: retrying does not help until a setting changes.
 */
export const retryAfterSeconds = (error: TooManyRequests | ServiceUnavailable): number | undefined => {
  switch (error.error.code) {
    case "model_unavailable":
    case "payments_unavailable":
      return undefined
    case "failure_limit":
    case "spend_limited":
      return 3600
    case "rate_limited":
    case "feedback_limited":
    case "capacity_limited":
    case "payment_pending":
      return 60
    default:
      return 5
  }
}

/** Adds Retry-After to whatever 429 or 503 the effect fails with, unless a more precise one was already set. */
export const withRetryAfter = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.tapError(effect, (error) =>
    isRetryable(error)
      ? HttpApp.appendPreResponseHandler((_request, response) =>
          Effect.succeed(
            response.headers["retry-after"] === undefined && retryAfterSeconds(error) !== undefined
              ? HttpServerResponse.setHeader(response, "retry-after", String(retryAfterSeconds(error)))
              : response
          )
        )
      : Effect.void
  )

const isRetryable = (error: unknown): error is TooManyRequests | ServiceUnavailable =>
  typeof error === "object" &&
  error !== null &&
  "_tag" in error &&
  (error._tag === "TooManyRequests" || error._tag === "ServiceUnavailable")
