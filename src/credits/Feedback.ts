/** Feedback on completed analyses: one submission per request, owned by the key, limited per key and service-wide per rolling day. */
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Context, Data, Effect, Layer, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { countRows, rowsOf } from "../db/rows.ts"
import { Conflict, NotFound } from "../domain/errors.ts"
import { KeyFingerprint, type PayerId, RequestId } from "../domain/ids.ts"
import { DAY_MS, rollingWindowStart } from "../limits/window.ts"
import { payerIdOf } from "./keys.ts"

/** The limits count the submissions of the rolling day that ends now. */
export const FEEDBACK_WINDOW_MS = DAY_MS
export const FEEDBACK_MAX_AGE_MS = 90 * DAY_MS

/** Which feedback limit refused a submission: the key's own or the service's. */
export class FeedbackLimited extends Data.TaggedError("FeedbackLimited")<{
  readonly scope: "key" | "global"
}> {}

export interface FeedbackSubmission {
  readonly requestId: string
  readonly category: string
  readonly note: string
}

const notEligible = () =>
  new NotFound({
    error: {
      code: "request_not_found",
      message: "No completed (paid or failed) request of this key with that request_id in the past 90 days."
    }
  })

const feedbackRows = rowsOf(Schema.Struct({ fingerprint: KeyFingerprint, category: Schema.String, note: Schema.String }))
const requestIds = rowsOf(Schema.Struct({ request_id: RequestId }))

const conflict = () =>
  new Conflict({ error: { code: "feedback_conflict", message: "A different feedback for this request was already recorded." } })

export class Feedback extends Context.Tag("morsel/credits/Feedback")<
  Feedback,
  {
    /** Records one submission of the key's completed request; an exact repeat is a duplicate, not an error. */
    readonly submit: (
      fingerprint: KeyFingerprint,
      submission: FeedbackSubmission
    ) => Effect.Effect<{ readonly duplicate: boolean }, NotFound | Conflict | FeedbackLimited | SqlError.SqlError>
  }
>() {}

export const FeedbackLive = Layer.effect(
  Feedback,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { limits } = yield* AppConfig

    const recorded = (requestId: string) =>
      feedbackRows(sql`SELECT fingerprint, category, note FROM credit_feedback WHERE request_id = ${requestId}`)

    /** The key's completed (paid or failed) request of that id, created at or after `oldestAllowed`. */
    const eligibleRequest = (requestId: string, payer: PayerId, oldestAllowed: Date) =>
      requestIds(sql`
        SELECT request_id FROM analysis_requests
        WHERE request_id = ${requestId}
          AND payer = ${payer}
          AND status IN ('paid', 'failed')
          AND created_at >= ${oldestAllowed}`)

    const countOfKey = (fingerprint: KeyFingerprint, windowStart: Date) =>
      countRows(sql`
        SELECT count(*)::int AS n FROM credit_feedback WHERE fingerprint = ${fingerprint} AND created_at > ${windowStart}`)

    const countOfAll = (windowStart: Date) =>
      countRows(sql`
        SELECT count(*)::int AS n FROM credit_feedback WHERE created_at > ${windowStart}`)

    const insert = (requestId: string, fingerprint: KeyFingerprint, category: string, note: string, now: Date) =>
      requestIds(sql`
        INSERT INTO credit_feedback (request_id, fingerprint, category, note, created_at)
        VALUES (${requestId}, ${fingerprint}, ${category}, ${note}, ${now})
        ON CONFLICT (request_id) DO NOTHING
        RETURNING request_id`)

    /** duplicate for an exact repeat, a conflict for a different one, nothing when there is none yet. */
    const existing = (fingerprint: KeyFingerprint, submission: FeedbackSubmission) =>
      Effect.gen(function* () {
        const [row] = yield* recorded(submission.requestId)
        if (row === undefined) return "none" as const
        const same = row.fingerprint === fingerprint && row.category === submission.category && row.note === submission.note
        return same ? ("duplicate" as const) : yield* Effect.fail(conflict())
      })

    const submit = (fingerprint: KeyFingerprint, submission: FeedbackSubmission) =>
      Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const now = new Date(nowMs)
        const oldestAllowed = new Date(nowMs - FEEDBACK_MAX_AGE_MS)
        const [eligible] = yield* eligibleRequest(submission.requestId, payerIdOf(fingerprint), oldestAllowed)
        if (eligible === undefined) return yield* Effect.fail(notEligible())
        // An exact repeat is answered before the limits, so a retried submission never gets 429.
        if ((yield* existing(fingerprint, submission)) === "duplicate") return { duplicate: true }

        const windowStart = new Date(rollingWindowStart(FEEDBACK_WINDOW_MS, nowMs))
        const inserted = yield* Effect.gen(function* () {
          // Serializes submissions so the per-key and global counts cannot be overtaken by a concurrent insert.
          yield* sql`SELECT pg_advisory_xact_lock(hashtext('morsel.credit_feedback'))`
          yield* sql`DELETE FROM credit_feedback WHERE created_at < ${oldestAllowed}`
          const [perKey] = yield* countOfKey(fingerprint, windowStart)
          if (perKey !== undefined && perKey.n >= limits.feedbackPerKeyPerDay) return yield* new FeedbackLimited({ scope: "key" })
          const [global] = yield* countOfAll(windowStart)
          if (global !== undefined && global.n >= limits.feedbackGlobalPerDay) return yield* new FeedbackLimited({ scope: "global" })
          const { requestId, category, note } = submission
          return yield* insert(requestId, fingerprint, category, note, now)
        }).pipe(sql.withTransaction)
        if (inserted.length > 0) return { duplicate: false }
        // A concurrent submission for the same request won: same content is a duplicate, other content a conflict.
        return (yield* existing(fingerprint, submission)) === "duplicate" ? { duplicate: true } : yield* Effect.fail(conflict())
      })

    return Feedback.of({ submit })
  })
)
