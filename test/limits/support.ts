/** Shared pieces of the limits tests: the limits on a fresh test database, and analyses started the way the pipeline starts them. */
import { randomUUID } from "node:crypto"
import { Effect, Either, Layer, Option } from "effect"
import { InputFingerprint, PayerId, type RequestId } from "../../src/domain/ids.ts"
import type { FundingKind, Payer } from "../../src/domain/payer.ts"
import { RequestStore, RequestStoreLive } from "../../src/analysis/RequestStore.ts"
import { AppConfigFromEnv } from "../../src/config.ts"
import { type Admission, admissionOf, claimCheck, Limits, LimitsLive } from "../../src/limits/Limits.ts"
import { TestDatabase } from "../support/database.ts"

/** LimitsLive and the request store on a fresh database with these settings (the documented defaults unless overridden). */
export const limitsLayer = (env: Readonly<Record<string, string>> = {}) =>
  Layer.mergeAll(LimitsLive, RequestStoreLive).pipe(
    Layer.provideMerge(TestDatabase),
    Layer.provideMerge(AppConfigFromEnv({ LOG_LEVEL: "warning", ...env })),
    Layer.orDie
  )

export const credit = (name: string): Payer => ({ kind: "credit", id: PayerId.make(`key:${name}`) })
export const wallet = (name: string): Payer => ({ kind: "x402", id: PayerId.make(`wallet:${name}`) })

export type Started =
  | { readonly _tag: "admitted"; readonly requestId: RequestId; readonly admission: Admission }
  | { readonly _tag: "refused"; readonly code: string }

const admitted = (requestId: RequestId, admission: Admission): Started => ({ _tag: "admitted", requestId, admission })
const refused = (code: string): Started => ({ _tag: "refused", code })

/**
 * Where a new attempt's admission is decided: by the statement that records it (`"in claim"`, as the pipeline does for
 * a new key), or by a statement of its own after it (`"after claim"`, as for a key whose earlier attempt failed).
 */
export type AdmittedBy = "in claim" | "after claim"

/** Claims a fresh request as the pipeline does, admitted as `by` says; a refused claim is forgotten like the pipeline forgets it. */
export const start = (payer: Payer, by: AdmittedBy = "in claim") =>
  Effect.gen(function* () {
    const store = yield* RequestStore
    const limits = yield* Limits
    const inClaim = by === "in claim" ? yield* limits.inClaim(payer) : Option.none()
    const { claim } = yield* store
      .claim({
        payer: payer.id,
        idempotencyKey: randomUUID(),
        fingerprint: InputFingerprint.make("f"),
        funding: payer.kind satisfies FundingKind,
        leaseMs: 60_000,
        admission: claimCheck(inClaim)
      })
      .pipe(Effect.orDie)
    if (claim._tag !== "Started") return yield* Effect.dieMessage(`unexpected claim ${claim._tag}`)
    const outcome = yield* Effect.either(admissionOf(limits, inClaim, payer, claim.requestId, claim.reached))
    if (Either.isRight(outcome)) return admitted(claim.requestId, outcome.right)
    yield* Effect.orDie(store.forget(claim.requestId))
    return refused(outcome.left.error.code)
  })

/** Starts `n` analyses one after another and releases each at once (so only the windows matter); returns their outcomes. */
export const startReleased = (payer: Payer | ((i: number) => Payer), n: number) =>
  Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) =>
    Effect.tap(start(typeof payer === "function" ? payer(i) : payer), (s) => (s._tag === "admitted" ? s.admission.release : Effect.void))
  )

export const outcome = (started: Started) => (started._tag === "admitted" ? "admitted" : started.code)

export const tally = (all: ReadonlyArray<Started>) => {
  const counts: Record<string, number> = {}
  for (const s of all) counts[outcome(s)] = (counts[outcome(s)] ?? 0) + 1
  return counts
}

/** Finishes an admitted analysis as failed, counting toward failure_limit or not (provider refusals do not). */
export const failAnalysis = (started: Started, countsAsFailure: boolean) =>
  Effect.gen(function* () {
    if (started._tag !== "admitted") return yield* Effect.dieMessage("only an admitted analysis can fail")
    const store = yield* RequestStore
    yield* Effect.orDie(store.fail(started.requestId, countsAsFailure ? "analysis_failed" : "provider_refusal", countsAsFailure))
    yield* started.admission.release
  })
