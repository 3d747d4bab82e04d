/** How refusals reach HTTP: the Retry-After header of every 429 and 503, and the credit endpoints' capacity limit. */
import { createHash } from "node:crypto"
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect, Redacted } from "effect"
import type { ServiceUnavailable, TooManyRequests } from "../domain/errors.ts"
import { CreditKey } from "../http/Api.ts"
import { CreditCapacity } from "./Capacity.ts"

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

/** The counters' subject for a key: a SHA-256 digest, so no key reaches the database. */
export const capacitySubject = (key: Redacted.Redacted<string>): string =>
  createHash("sha256").update(Redacted.value(key), "utf8").digest("hex")

/**
 * Runs `handler` only if the key and the service have capacity left this minute; otherwise 429
 * `capacity_limited`. For balance, checkout and confirm, the three endpoints whose 429 is the capacity limit.
 */
export const withCreditCapacity = <A, E, R>(
  handler: Effect.Effect<A, E, R>
): Effect.Effect<A, E | TooManyRequests, R | CreditKey | CreditCapacity> =>
  Effect.gen(function* () {
    const capacity = yield* CreditCapacity
    const key = yield* CreditKey
    yield* capacity.admit(capacitySubject(key))
    return yield* handler
  })
