/** Who calls the free food paths (REST and MCP) and whether they may: a sent Bearer key must be valid (401), then the limit (429). */
import { Effect, Option, Redacted } from "effect"
import { invalidKey, orStorageUnavailable } from "../credits/failures.ts"
import { KeyFingerprints } from "../credits/keys.ts"
import { Ledger } from "../credits/Ledger.ts"
import { FoodLimits } from "../limits/FoodLimits.ts"

/**
 * Admits one food call from `address`, with the Authorization header as sent (or undefined). A key is optional; one
 * that is sent must be a known key of this server's mode, else 401 `invalid_key` (nothing counted). Then one call
 * counts against the address's and the key's minute.
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
    const account = yield* orStorageUnavailable(ledger.account(fingerprint.value))
    if (Option.isNone(account)) return yield* Effect.fail(invalidKey())
    return yield* limits.admit({ address, key: fingerprint.value })
  })
