/** Admission control for new analyses: rolling windows and concurrency leases kept in PostgreSQL for every instance. */
import { SqlClient, type Statement } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { AppConfig, type Limits as LimitSettings } from "../config.ts"
import { rowsOf } from "../db/rows.ts"
import { orStorageUnavailable } from "../db/storage.ts"
import type { RequestId } from "../domain/ids.ts"
import type { Payer } from "../domain/payer.ts"
import { type ServiceUnavailable, TooManyRequests } from "../domain/errors.ts"
import { attemptLeaseMs } from "./lease.ts"
import { DAY_MS, HOUR_MS, rollingWindowStart } from "./window.ts"

/** A held slot of the concurrency limits; released when the analysis ends, however it ends. */
export interface Admission {
  readonly release: Effect.Effect<void>
}

/**
 * An admission decided by the statement that records the attempt (RequestStore's claim): one statement and one
 * commit for both, and no recorded attempt without its admission even for a moment.
 */
export interface ClaimAdmission {
  /** The SQL expression that admits `requestId` or names the limit reached (NULL when admitted). */
  readonly check: (requestId: RequestId) => Statement.Fragment
  /** What the expression answered, as `admit` would have answered it. */
  readonly decided: (requestId: RequestId, reached: string | null) => Effect.Effect<Admission, TooManyRequests>
}

export class Limits extends Context.Tag("morsel/Limits")<
  Limits,
  {
    /**
     * Admit one new analysis for `payer`, or refuse with 429 (its `retryAfterSeconds` becomes the caller's
     * Retry-After). Storage trouble is a 503: without the shared counts no instance can tell whether it may start.
     */
    readonly admit: (payer: Payer, requestId: RequestId) => Effect.Effect<Admission, TooManyRequests | ServiceUnavailable>
    /**
     * The same admission for `payer`, to be decided inside the statement that records a new attempt; none where the
     * limits are not kept in the database (then `admit` follows the claim).
     */
    readonly inClaim: (payer: Payer) => Effect.Effect<Option.Option<ClaimAdmission>>
    /**
     * Read-only look for a request that carries no funding yet: would an x402-paid analysis be admitted now
     * (service-wide windows and concurrency, the x402 share)? Lets the 402 challenge wait until it can be used.
     */
    readonly peek: Effect.Effect<void, TooManyRequests | ServiceUnavailable>
    /** Whether `peek` would succeed at `nowMs` from its last look alone (false when that look is stale or refused). */
    readonly openAt: (nowMs: number) => boolean
  }
>() {}

/** The expression a claim runs for its new attempt's admission (`ClaimInput.admission`), if the limits give one. */
export const claimCheck = (inClaim: Option.Option<ClaimAdmission>): ClaimAdmission["check"] | undefined =>
  Option.getOrUndefined(Option.map(inClaim, (admission) => admission.check))

/**
 * The admission of a new attempt: what the statement that recorded it answered (`reached`, see `inClaim`), or, when
 * that statement decided none, `admit`.
 */
export const admissionOf = (
  limits: Context.Tag.Service<typeof Limits>,
  inClaim: Option.Option<ClaimAdmission>,
  payer: Payer,
  requestId: RequestId,
  reached: string | null | undefined
): Effect.Effect<Admission, TooManyRequests | ServiceUnavailable> =>
  Option.isSome(inClaim) && reached !== undefined ? inClaim.value.decided(requestId, reached) : limits.admit(payer, requestId)

/** No limits at all: for tests of other features. */
export const LimitsUnlimited = Layer.succeed(Limits, {
  admit: () => Effect.succeed({ release: Effect.void }),
  inClaim: () => Effect.succeedNone,
  peek: Effect.void,
  openAt: () => true
})

/** How long an instance reuses its last look at the limits for 402 challenges (admission itself never reuses it). */
export const PEEK_REUSE_MS = 1_000

/** The limits `limit_admission` names, with the answer each one gives. */
export type LimitName =
  | "failures"
  | "payer_day"
  | "concurrent"
  | "global_hour"
  | "global_day"
  | "x402_concurrent"
  | "x402_hour"
  | "x402_day"

const refusal = (code: TooManyRequests["error"]["code"], message: string) => new TooManyRequests({ error: { code, message } })

/** The 429 for a reached limit: failure_limit and spend_limited are the payer's own, everything else rate_limited. */
export const refusalFor = (limits: LimitSettings, name: LimitName): TooManyRequests => {
  switch (name) {
    case "failures":
      return refusal(
        "failure_limit",
        `${limits.failuresPerDay} unsuccessful analyses of this payer in the past 24 hours; new requests are paused for a while.`
      )
    case "payer_day":
      return refusal("spend_limited", `This payer started ${limits.payerPerDay} analyses in the past 24 hours, its daily cap.`)
    case "concurrent":
      return refusal("rate_limited", `${limits.concurrent} analyses are running, the most the beta runs at once.`)
    case "global_hour":
      return refusal("rate_limited", `The beta started ${limits.globalPerHour} analyses in the past hour, its hourly allowance.`)
    case "global_day":
      return refusal("rate_limited", `The beta started ${limits.globalPerDay} analyses in the past 24 hours, its daily allowance.`)
    case "x402_concurrent":
      return refusal("rate_limited", `${limits.x402Concurrent} x402-paid analyses are running, the most the x402 share runs at once.`)
    case "x402_hour":
      return refusal("rate_limited", `The x402 share of ${limits.x402PerHour} analyses per hour is taken.`)
    case "x402_day":
      return refusal("rate_limited", `The x402 share of ${limits.x402PerDay} analyses per 24 hours is taken.`)
  }
}

const limitNames: ReadonlyArray<string> = [
  "failures",
  "payer_day",
  "concurrent",
  "global_hour",
  "global_day",
  "x402_concurrent",
  "x402_hour",
  "x402_day"
] satisfies ReadonlyArray<LimitName>
const isLimitName = (s: string): s is LimitName => limitNames.includes(s)

/** What `limit_admission` answers: NULL when admitted, else the name of the limit reached. */
const decisions = rowsOf(Schema.Struct({ reached: Schema.NullOr(Schema.String) }))

/**
 * Limits on PostgreSQL. Each admission is one call of the `limit_admission` function (migration 0005), made by
 * the statement that records a new attempt (`inClaim`) or by one of its own (`admit`): it takes the `limit_locks`
 * row FOR UPDATE, counts `limit_admissions` (and the payer's counted failures in `analysis_requests`) and inserts
 * its own row, all in one statement's transaction, so instances never overtake each other. Nothing spans an
 * analysis: a slot is a row whose lease ends with the attempt's lease (`attemptLeaseMs`) unless released first — by
 * the statement that ends the attempt (migration 0010), or by `release` — so a crashed instance cannot hold it for
 * long.
 */
export const LimitsLive: Layer.Layer<Limits, never, AppConfig | SqlClient.SqlClient> = Layer.effect(
  Limits,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const settings = yield* AppConfig
    const limits = settings.limits
    // The same bound as a running attempt's idempotency lease: past it the instance is presumed gone.
    const leaseMs = attemptLeaseMs(settings)

    /** The call that answers the limit refusing this analysis at `nowMs`, if any; it inserts the admission when `admit` and none does. */
    const admission = (requestId: RequestId | null, payer: Payer | undefined, admit: boolean, nowMs: number) => sql`
      limit_admission(
        ${requestId}::uuid, ${payer?.id ?? null}::text, ${payer?.kind ?? "x402"}::text, ${admit}::boolean,
        ${new Date(nowMs)}::timestamptz, ${new Date(rollingWindowStart(HOUR_MS, nowMs))}::timestamptz,
        ${new Date(rollingWindowStart(DAY_MS, nowMs))}::timestamptz, ${new Date(nowMs + leaseMs)}::timestamptz,
        ${limits.globalPerDay}::int, ${limits.globalPerHour}::int, ${limits.payerPerDay}::int, ${limits.concurrent}::int,
        ${limits.x402PerDay}::int, ${limits.x402PerHour}::int, ${limits.x402Concurrent}::int, ${limits.failuresPerDay}::int
      )`

    /** The refusal `limit_admission` answered, if any. */
    const refusalOf = (reached: string | null) =>
      reached === null
        ? Effect.succeed(undefined)
        : isLimitName(reached)
          ? Effect.succeed(refusalFor(limits, reached))
          : Effect.dieMessage(`limit_admission answered an unknown limit: ${reached}`)

    /** The limit that refuses this analysis now, if any; inserts its admission when `admit` and none does. */
    const decide = (requestId: RequestId | null, payer: Payer | undefined, admit: boolean) =>
      Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const rows = yield* decisions(sql`SELECT ${admission(requestId, payer, admit, nowMs)} AS reached`).pipe(orStorageUnavailable)
        return yield* refusalOf(rows[0]?.reached ?? null)
      })

    const release = (requestId: RequestId) =>
      Effect.flatMap(Clock.currentTimeMillis, (nowMs) =>
        sql`UPDATE limit_admissions SET released_at = ${new Date(nowMs)} WHERE request_id = ${requestId} AND released_at IS NULL`
      ).pipe(
        Effect.asVoid,
        // The lease frees the slot anyway; a lost release only holds it until then.
        Effect.catchAll((error) => Effect.logWarning("could not release an analysis slot; its lease will free it", error)),
        Effect.uninterruptible
      )

    /** An admission decided (`refused` undefined) or refused; this instance's own show in its next challenge at once. */
    const admitted = (payer: Payer, requestId: RequestId, refused: TooManyRequests | undefined) =>
      Effect.zipRight(
        forgetPeek,
        refused === undefined
          ? Effect.succeed({ release: Effect.zipRight(release(requestId), forgetPeek) } satisfies Admission)
          : Effect.zipRight(Effect.logInfo("new analysis refused by a limit", { code: refused.error.code, funding: payer.kind }), Effect.fail(refused))
      )

    const admit = (payer: Payer, requestId: RequestId) =>
      Effect.flatMap(decide(requestId, payer, true), (refused) => admitted(payer, requestId, refused))

    const inClaim = (payer: Payer) =>
      Effect.map(Clock.currentTimeMillis, (nowMs) =>
        Option.some<ClaimAdmission>({
          check: (requestId) => admission(requestId, payer, true, nowMs),
          decided: (requestId, reached) => Effect.flatMap(refusalOf(reached), (refused) => admitted(payer, requestId, refused))
        })
      )

    // An unfunded request would be paid with x402 (a key holder sends the key): the service-wide and x402 limits apply.
    // The answer is only advice (the paid retry is admitted atomically, and a refusal then charges nothing), so each
    // instance reuses it for PEEK_REUSE_MS: a flood of unpaid requests costs one database read per instance per second.
    let seen: { readonly atMs: number; readonly refused: TooManyRequests | undefined } | undefined
    const forgetPeek = Effect.sync(() => {
      seen = undefined
    })
    const freshAt = (nowMs: number) => seen !== undefined && nowMs >= seen.atMs && nowMs - seen.atMs < PEEK_REUSE_MS
    const peek = Effect.gen(function* () {
      const nowMs = yield* Clock.currentTimeMillis
      const fresh = freshAt(nowMs)
      const refused = fresh ? seen?.refused : yield* decide(null, undefined, false)
      if (!fresh) seen = { atMs: nowMs, refused }
      if (refused !== undefined) return yield* refused
    })
    const openAt = (nowMs: number) => freshAt(nowMs) && seen?.refused === undefined

    return Limits.of({ admit, inClaim, peek, openAt })
  })
)
