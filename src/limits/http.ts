/** The capacity limit as credit handlers apply it: the caller's key from CreditKey, Retry-After on refusal. */
import { createHash } from "node:crypto"
import { Effect, Redacted } from "effect"
import type { TooManyRequests } from "../domain/errors.ts"
import { CreditKey } from "../http/Api.ts"
import { CreditCapacity } from "./Capacity.ts"

/** The counters' subject for a key: a SHA-256 digest, so no key reaches the database. */
export const capacitySubject = (key: Redacted.Redacted<string>): string =>
  createHash("sha256").update(Redacted.value(key), "utf8").digest("hex")

/**
 * Runs `handler` only if the key and the service have capacity left this minute; otherwise 429
 * `capacity_limited`. For balance, checkout and confirm (SPEC §7 lists the capacity 429 for those three).
 */
export const withCreditCapacity = <A, E, R>(
  handler: Effect.Effect<A, E, R>
): Effect.Effect<A, E | TooManyRequests, R | CreditKey | CreditCapacity> =>
  Effect.gen(function* () {
    const capacity = yield* CreditCapacity
    const key = yield* CreditKey
    // SPEC §8: Retry-After is 60 s (set with the 429) for every limit but failure_limit and spend_limited.
    yield* capacity.admit(capacitySubject(key)).pipe(Effect.catchAll(({ error }) => Effect.fail(error)))
    return yield* handler
  })
