/** The idempotent lifecycle of analysis requests in PostgreSQL, shared by every instance. */
import type { SqlError, Statement } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Data, Effect, Layer, Option, Schema } from "effect"
import { rowsOf } from "../db/rows.ts"
import { InputFingerprint, type PayerId, RequestId } from "../domain/ids.ts"
import { FundingKind } from "../domain/payer.ts"
import { AnalysisResult } from "../domain/schemas.ts"
import { Ids } from "../ids.ts"
import type { ModelCall } from "../model/usage.ts"

export const RESULT_RETENTION_MS = 24 * 60 * 60 * 1000

/** What a claim on (payer, key) found: a fresh attempt, or why there is none. */
export type Claim = Data.TaggedEnum<{
  /**
   * A new attempt. `reached` is what the `admission` of the claim answered when the statement that recorded the
   * attempt ran it: null when admitted, else the limit reached; undefined when no admission ran with it.
   */
  Started: { readonly requestId: RequestId; readonly reached: string | null | undefined }
  Replay: {
    readonly requestId: RequestId
    readonly result: AnalysisResult
    readonly paymentResponse: Option.Option<string>
    readonly completedAt: Date
  }
  Pending: { readonly requestId: RequestId; readonly result: AnalysisResult }
  InProgress: { readonly requestId: RequestId }
  Conflict: { readonly requestId: RequestId }
  Expired: { readonly requestId: RequestId }
}>
export const Claim = Data.taggedEnum<Claim>()

export interface ClaimInput {
  readonly payer: PayerId
  readonly idempotencyKey: string
  readonly fingerprint: InputFingerprint
  readonly funding: FundingKind
  /** How long a running attempt may hold its key before another instance may take it over. */
  readonly leaseMs: number
  /**
   * An SQL expression deciding the admission of a new attempt, run by the statement that records it when the key is
   * new (NULL when admitted, else the limit reached): one statement and one commit for both.
   */
  readonly admission?: ((requestId: RequestId) => Statement.Fragment) | undefined
  /**
   * The id a new attempt is recorded under (a new one when absent): known to the caller before the statement runs, so
   * that an attempt whose recording committed but whose answer was lost can still be found and closed.
   */
  readonly requestId?: RequestId | undefined
}

/** An attempt whose instance vanished while it ran; its reservation must be given back. */
export interface Abandoned {
  readonly requestId: RequestId
  readonly funding: FundingKind
}

/** The columns of `analysis_requests` a claim reads; the result stays undecoded until it is served. */
const Attempt = Schema.Struct({
  request_id: RequestId,
  input_fingerprint: InputFingerprint,
  status: Schema.Literal("running", "paid", "failed", "payment_pending"),
  result: Schema.Unknown,
  payment_response: Schema.NullOr(Schema.String),
  lease_until: Schema.DateFromSelf,
  completed_at: Schema.NullOr(Schema.DateFromSelf)
})
type Attempt = typeof Attempt.Type
const attempts = rowsOf(Attempt)
/** The first look at a key: the attempt this look recorded (`recorded`, with its admission's answer), or the key's latest attempt. */
const looks = rowsOf(Schema.extend(Attempt, Schema.Struct({ recorded: Schema.Boolean, reached: Schema.NullOr(Schema.String) })))
const abandonedRows = rowsOf(Schema.Struct({ request_id: RequestId, funding: FundingKind }))
const heldRows = rowsOf(Schema.Struct({ request_id: RequestId }))
const leaseEnds = rowsOf(Schema.Struct({ lease_until: Schema.NullOr(Schema.DateFromSelf) }))
/** A new attempt's id: the next id of the `Ids` service (a fixed sequence in tests). */
export const nextRequestId = Effect.map(Ids.next, RequestId.make)

/** The attempt is no longer ours: its lease ran out and it was closed or taken over meanwhile. */
export class AttemptLost extends Data.TaggedError("AttemptLost")<{ readonly requestId: RequestId }> {}

const decodeResult = Schema.decodeUnknown(AnalysisResult)
const encodeResult = Schema.encode(AnalysisResult)

export class RequestStore extends Context.Tag("morsel/RequestStore")<
  RequestStore,
  {
    /** Whether (payer, key) has an attempt a retry is answered from (paid, pending or running): its input decides how. */
    readonly holds: (payer: PayerId, idempotencyKey: string) => Effect.Effect<boolean, SqlError.SqlError>
    /** Start an attempt for (payer, key), or say why not: replay, in progress, conflict, expired, pending. */
    readonly claim: (input: ClaimInput) => Effect.Effect<{ readonly claim: Claim; readonly abandoned: ReadonlyArray<Abandoned> }, SqlError.SqlError>
    /**
     * The attempt never became one (a limit or the payment refused it): remove it without a trace, unless a payment
     * claim of it was stored after all; then it is closed as failed, which lets a retry free that claim.
     */
    readonly forget: (requestId: RequestId) => Effect.Effect<void, SqlError.SqlError>
    /**
     * Close a running or pending attempt as failed. `usage`, what its model call used (tokens, time, cost), is kept by
     * the same statement for the admin lookup and counters, as it is by `pending` and `complete`.
     */
    readonly fail: (requestId: RequestId, code: string, countsAsFailure: boolean, usage?: ModelCall) => Effect.Effect<void, SqlError.SqlError>
    /** Save the result of a running attempt whose payment is under way; fails when the attempt was lost. */
    readonly pending: (
      requestId: RequestId,
      result: AnalysisResult,
      paymentResponse: Option.Option<string>,
      usage?: ModelCall
    ) => Effect.Effect<void, SqlError.SqlError | AttemptLost>
    /** Save the result of a paid attempt (running or pending); fails when the attempt was lost. */
    readonly complete: (
      requestId: RequestId,
      result: AnalysisResult,
      paymentResponse: Option.Option<string>,
      usage?: ModelCall
    ) => Effect.Effect<void, SqlError.SqlError | AttemptLost>
    /** A pending payment was settled in the background: the saved result becomes a completed one. */
    readonly settlePending: (requestId: RequestId, paymentResponse: string) => Effect.Effect<void, SqlError.SqlError>
    /** Running attempts whose lease ran out are marked failed and returned for their reservations to be released. */
    readonly abandonStale: Effect.Effect<ReadonlyArray<Abandoned>, SqlError.SqlError>
    /**
     * An attempt its instance saw end without recording the end (storage failed meanwhile): marked failed at once,
     * where its lease would hold it, and returned (when it was still running) for its reservation to be released.
     */
    readonly abandonEnded: (requestId: RequestId) => Effect.Effect<ReadonlyArray<Abandoned>, SqlError.SqlError>
    /** When the earliest lease of a running attempt ends, if any is running. */
    readonly nextLeaseEnd: Effect.Effect<Option.Option<Date>, SqlError.SqlError>
  }
>() {}

const MAX_INTEGER_COLUMN = 2_147_483_647
const tokenCount = (n: number | undefined): number | null =>
  n !== undefined && Number.isSafeInteger(n) && n >= 0 && n <= MAX_INTEGER_COLUMN ? n : null
const finiteOr = <A>(n: number | undefined, otherwise: A): number | A => (n !== undefined && Number.isFinite(n) ? n : otherwise)

export const RequestStoreLive = Layer.effect(
  RequestStore,
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient
    const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

    const abandonRunning = (at: Date, which: Statement.Fragment) =>
      abandonedRows(sql`
        UPDATE analysis_requests SET status = 'failed', failure_code = 'abandoned', completed_at = ${at}
        WHERE status = 'running' AND ${which}
        RETURNING request_id, funding`).pipe(Effect.map((rows) => rows.map((r) => ({ requestId: r.request_id, funding: r.funding }))))

    const abandonStaleAt = (at: Date, where: { payer: PayerId; idempotencyKey: string } | undefined) =>
      abandonRunning(
        at,
        sql`lease_until < ${at} ${where ? sql`AND payer = ${where.payer} AND idempotency_key = ${where.idempotencyKey}` : sql``}`
      )

    const purgeExpiredResults = (at: Date) =>
      sql`UPDATE analysis_requests SET result = NULL
        WHERE status = 'paid' AND result IS NOT NULL AND completed_at <= ${new Date(at.getTime() - RESULT_RETENTION_MS)}`

    const classify = (row: Attempt, fingerprint: InputFingerprint, at: Date): Effect.Effect<Claim> =>
      Effect.gen(function* () {
        const requestId = row.request_id
        if (row.input_fingerprint !== fingerprint) return Claim.Conflict({ requestId })
        switch (row.status) {
          case "running":
          case "failed":
            return Claim.InProgress({ requestId })
          case "payment_pending":
            return Claim.Pending({ requestId, result: yield* Effect.orDie(decodeResult(row.result)) })
          case "paid": {
            const fresh = row.completed_at !== null && at.getTime() - row.completed_at.getTime() < RESULT_RETENTION_MS
            if (!fresh || row.completed_at === null || row.result === null) return Claim.Expired({ requestId })
            return Claim.Replay({
              requestId,
              result: yield* Effect.orDie(decodeResult(row.result)),
              paymentResponse: Option.fromNullable(row.payment_response),
              completedAt: row.completed_at
            })
          }
        }
      })

    // A key names one input for good: even after a failed attempt, another input needs another key.
    const latestFor = (input: ClaimInput) =>
      Effect.map(
        attempts(sql`
          SELECT * FROM analysis_requests WHERE payer = ${input.payer} AND idempotency_key = ${input.idempotencyKey}
          ORDER BY (status <> 'failed') DESC, created_at DESC LIMIT 1`),
        (rows) => rows[0]
      )

    /**
     * A live attempt (paid, pending, or running within its lease) is answered from one read: at most one live
     * row exists per key, so there is no stale attempt of this key to abandon and nothing to insert.
     */
    const isLive = (row: Attempt, at: Date): boolean =>
      row.status !== "failed" && (row.status !== "running" || row.lease_until.getTime() >= at.getTime())

    const insertAttempt = sql`
      INSERT INTO analysis_requests (request_id, payer, idempotency_key, input_fingerprint, funding, status, lease_until, created_at)`
    /** A running attempt of `input`, holding its key for the lease. */
    const newAttempt = (input: ClaimInput, requestId: RequestId, at: Date) =>
      sql`${requestId}, ${input.payer}, ${input.idempotencyKey}, ${input.fingerprint}, ${input.funding}, 'running', ${new Date(at.getTime() + input.leaseMs)}, ${at}`

    /**
     * The key's latest attempt; or, when the key was never used, a new running attempt `requestId` recorded by the
     * same statement (which is also when expired result texts are removed, and its admission decided). A first attempt
     * and a replay each cost one round trip; neither row comes back when another instance recorded the key in the
     * meantime.
     */
    const firstLook = (input: ClaimInput, requestId: RequestId, at: Date) =>
      Effect.map(
        looks(sql`
          WITH latest AS (
            SELECT * FROM analysis_requests WHERE payer = ${input.payer} AND idempotency_key = ${input.idempotencyKey}
            ORDER BY (status <> 'failed') DESC, created_at DESC LIMIT 1),
          purged AS (${purgeExpiredResults(at)} AND NOT EXISTS (SELECT 1 FROM latest)),
          recorded AS (
            ${insertAttempt} SELECT ${newAttempt(input, requestId, at)} WHERE NOT EXISTS (SELECT 1 FROM latest)
            ON CONFLICT (payer, idempotency_key) WHERE status <> 'failed' DO NOTHING
            RETURNING *)
          SELECT *, true AS recorded, ${input.admission?.(requestId) ?? sql`NULL`}::text AS reached FROM recorded
          UNION ALL
          SELECT *, false AS recorded, NULL::text AS reached FROM latest`),
        (rows) => rows[0]
      )

    const claim = (input: ClaimInput) =>
      Effect.gen(function* () {
        const at = yield* now
        const requestId = input.requestId ?? (yield* nextRequestId)
        const first = yield* firstLook(input, requestId, at)
        if (first?.recorded) {
          return { claim: Claim.Started({ requestId, reached: input.admission === undefined ? undefined : first.reached }), abandoned: [] }
        }
        const current = first ?? (yield* latestFor(input))
        if (current !== undefined && isLive(current, at)) return { claim: yield* classify(current, input.fingerprint, at), abandoned: [] }
        // Only a running attempt past its lease can be stale: a key that has none (or only failed ones) skips the write.
        const abandoned =
          current?.status === "running" ? yield* abandonStaleAt(at, { payer: input.payer, idempotencyKey: input.idempotencyKey }) : []
        // An expired attempt was just abandoned, here or by another instance: read the key again.
        const latest = current?.status === "running" ? yield* latestFor(input) : current
        if (latest && latest.status !== "failed") return { claim: yield* classify(latest, input.fingerprint, at), abandoned }
        if (latest && latest.input_fingerprint !== input.fingerprint) {
          return { claim: Claim.Conflict({ requestId: latest.request_id }), abandoned }
        }
        // Recording a new request is when expired result texts are removed: one statement does both.
        const inserted = yield* sql`
          WITH purged AS (${purgeExpiredResults(at)})
          ${insertAttempt} VALUES (${newAttempt(input, requestId, at)})
          ON CONFLICT (payer, idempotency_key) WHERE status <> 'failed' DO NOTHING
          RETURNING request_id`
        if (inserted.length > 0) return { claim: Claim.Started({ requestId, reached: undefined }), abandoned }
        // Another instance claimed the key between our read and our insert.
        const [winner] = yield* attempts(sql`
          SELECT * FROM analysis_requests
          WHERE payer = ${input.payer} AND idempotency_key = ${input.idempotencyKey} AND status <> 'failed'`)
        return {
          claim: winner ? yield* classify(winner, input.fingerprint, at) : Claim.InProgress({ requestId }),
          abandoned
        }
      })

    /**
     * What an attempt's model call used, kept by the statement that ends the attempt (one round trip, not one of its
     * own), as a query of its WITH. A count the integer column cannot hold (a provider reporting a fraction, or more
     * than 2³¹) is kept as not reported; a row kept before stays as it is.
     */
    const usageRow = (requestId: RequestId, usage: ModelCall, at: Date) => {
      const { cached, completion, prompt, reasoning } = usage.tokens
      return sql`usage AS (
        INSERT INTO model_calls (request_id, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, seconds, output, cost_usd, created_at)
        SELECT request_id, ${tokenCount(prompt)}::integer, ${tokenCount(completion)}::integer, ${tokenCount(reasoning)}::integer,
          ${tokenCount(cached)}::integer, ${finiteOr(usage.seconds, 0)}::double precision, ${usage.output}::text,
          ${finiteOr(usage.costUsd, null)}::double precision, ${at}::timestamptz
        FROM analysis_requests WHERE request_id = ${requestId}
        ON CONFLICT (request_id) DO NOTHING)`
    }

    const finish = (
      requestId: RequestId,
      status: "paid" | "payment_pending",
      result: AnalysisResult,
      paymentResponse: Option.Option<string>,
      usage: ModelCall | undefined
    ) =>
      Effect.gen(function* () {
        const at = yield* now
        const encoded = yield* Effect.orDie(encodeResult(result))
        // A paid result may have been saved meanwhile by the reconciler (settlePending): that is this save, done.
        const updated = yield* sql`
          WITH ${usage === undefined ? sql`` : sql`${usageRow(requestId, usage, at)},`} saved AS (
            UPDATE analysis_requests
            SET status = ${status}, result = ${sql.json(encoded)}, payment_response = ${Option.getOrNull(paymentResponse)},
                completed_at = ${status === "paid" ? at : null}
            WHERE request_id = ${requestId} AND status IN ('running', 'payment_pending')
            RETURNING request_id)
          SELECT request_id FROM saved
          UNION ALL
          SELECT request_id FROM analysis_requests
          WHERE request_id = ${requestId} AND status = 'paid' AND ${status} = 'paid' AND NOT EXISTS (SELECT 1 FROM saved)`
        if (updated.length === 0) return yield* new AttemptLost({ requestId })
      })

    return RequestStore.of({
      holds: (payer, idempotencyKey) =>
        Effect.map(
          heldRows(sql`
            SELECT request_id FROM analysis_requests WHERE payer = ${payer} AND idempotency_key = ${idempotencyKey} AND status <> 'failed' LIMIT 1`),
          (rows) => rows.length > 0
        ),
      claim,
      // A payment claim may exist though its caller saw an error (its INSERT committed, the answer was lost): then the
      // attempt is closed as failed instead, so the claim's holder is a failed request and the retry can free it.
      forget: (requestId) =>
        Effect.flatMap(now, (at) =>
          sql`
            WITH claimed AS (SELECT 1 FROM x402_payments WHERE request_id = ${requestId}),
            closed AS (
              UPDATE analysis_requests SET status = 'failed', failure_code = 'abandoned', completed_at = ${at}
              WHERE request_id = ${requestId} AND status = 'running' AND EXISTS (SELECT 1 FROM claimed))
            DELETE FROM analysis_requests
            WHERE request_id = ${requestId} AND status = 'running' AND NOT EXISTS (SELECT 1 FROM claimed)`
        ).pipe(Effect.asVoid),
      fail: (requestId, code, countsAsFailure, usage) =>
        Effect.flatMap(now, (at) =>
          sql`
            ${usage === undefined ? sql`` : sql`WITH ${usageRow(requestId, usage, at)}`}
            UPDATE analysis_requests
            SET status = 'failed', failure_code = ${code}, counts_as_failure = ${countsAsFailure}, result = NULL, completed_at = ${at}
            WHERE request_id = ${requestId} AND status IN ('running', 'payment_pending')`
        ).pipe(Effect.asVoid),
      pending: (requestId, result, paymentResponse, usage) => finish(requestId, "payment_pending", result, paymentResponse, usage),
      complete: (requestId, result, paymentResponse, usage) => finish(requestId, "paid", result, paymentResponse, usage),
      settlePending: (requestId, paymentResponse) =>
        Effect.flatMap(now, (at) =>
          sql`
            UPDATE analysis_requests SET status = 'paid', payment_response = ${paymentResponse}, completed_at = ${at}
            WHERE request_id = ${requestId} AND status = 'payment_pending'`
        ).pipe(Effect.asVoid),
      abandonStale: Effect.flatMap(now, (at) => abandonStaleAt(at, undefined)),
      abandonEnded: (requestId) => Effect.flatMap(now, (at) => abandonRunning(at, sql`request_id = ${requestId}`)),
      nextLeaseEnd: Effect.map(
        leaseEnds(sql`SELECT min(lease_until) AS lease_until FROM analysis_requests WHERE status = 'running'`),
        (rows) => Option.fromNullable(rows[0]?.lease_until)
      )
    })
  })
)
