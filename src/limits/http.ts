/** How refusals reach HTTP: the Retry-After header of every 429 and 503. */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import type { ServiceUnavailable, TooManyRequests } from "../domain/errors.ts"

const isRetryable = (error: unknown): error is TooManyRequests | ServiceUnavailable =>
  typeof error === "object" &&
  error !== null &&
  "_tag" in error &&
  (error._tag === "TooManyRequests" || error._tag === "ServiceUnavailable")

/**
 * The one place a refusal's `retryAfterSeconds` becomes the Retry-After header (MCP reports the same value as
 * `retry_after_seconds`). A header already set by a part that knows better (a pending settlement) is kept.
 */
export const withRetryAfter = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.tapError(effect, (error) => {
    const seconds = isRetryable(error) ? error.retryAfterSeconds : undefined
    return seconds === undefined
      ? Effect.void
      : HttpApp.appendPreResponseHandler((_request, response) =>
          Effect.succeed(
            response.headers["retry-after"] === undefined ? HttpServerResponse.setHeader(response, "retry-after", String(seconds)) : response
          )
        )
  })
