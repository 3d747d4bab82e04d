/** Who calls the free food paths (REST and MCP) and whether they may: a sent Bearer key must be valid (401), then the limit (429). */
import type { HttpServerRequest } from "@effect/platform"
import { Effect, type Exit, Option, Redacted } from "effect"
import { invalidKey, orStorageUnavailable } from "../../credits/failures.ts"
import { KeyFingerprints } from "../../credits/keys.ts"
import { Ledger } from "../../credits/Ledger.ts"
import { FoodLimits } from "../../limits/FoodLimits.ts"

/**
 * Admits one food call from `address`, with the Authorization header as sent (or undefined). A key is optional; one
 * that is sent must be a known key of this server's mode, else 401 `invalid_key`, after a count against the
 * address's allowance for unknown keys (past it 429). Then one call counts: a key that paid against its own minute
 * only, any other call against its address's.
 */
export const admitFoodCall = (address: string, authorization: string | undefined) =>
  Effect.gen(function* () {
    const limits = yield* FoodLimits
    if (authorization === undefined) return yield* limits.admit({ address })
    const keys = yield* KeyFingerprints
    const ledger = yield* Ledger
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
    const fingerprint = match?.[1] === undefined ? Option.none() : keys.fingerprint(Redacted.make(match[1]))
    if (Option.isNone(fingerprint)) return yield* Effect.fail(invalidKey())
    // A paid key is known: one lookup for the calls that have their own budget.
    if (yield* orStorageUnavailable(ledger.hasPaid(fingerprint.value))) return yield* limits.admit({ key: fingerprint.value })
    if (Option.isSome(yield* orStorageUnavailable(ledger.account(fingerprint.value)))) return yield* limits.admit({ address })
    yield* limits.admitUnknownKey(address)
    return yield* Effect.fail(invalidKey())
  })

/** What a food admission fails with. */
export type FoodRefusal = Effect.Effect.Error<ReturnType<typeof admitFoodCall>>

/** Admissions the nutrition lane decided for the requests it passed on to the stack (each counted once, there). */
const decided = new WeakMap<object, Exit.Exit<void, FoodRefusal>>()

/** Notes the lane's admission of `passed`, the request the stack will read. */
export const passWithAdmission = (passed: object, admission: Exit.Exit<void, FoodRefusal>): void => {
  decided.set(passed, admission)
}

/** The admission of a food call of the HttpApi stack: the lane's, when it already decided it, else `admitFoodCall`. */
export const admitFoodRequest = (request: HttpServerRequest.HttpServerRequest, address: (request: HttpServerRequest.HttpServerRequest) => string) => {
  const source = request.source
  const known = typeof source === "object" && source !== null ? decided.get(source) : undefined
  return known ?? admitFoodCall(address(request), request.headers["authorization"])
}
