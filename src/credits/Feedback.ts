/** Feedback on completed analyses (SPEC §4.7): one submission per request, owned by the key, rate-limited. */
import { SqlClient } from "@effect/sql"
import { Clock, Data, Effect } from "effect"
import { AppConfig } from "../config.ts"
import { Conflict, NotFound } from "../domain/errors.ts"
import { payerIdOf } from "./keys.ts"

export const FEEDBACK_WINDOW_MS = 24 * 3600 * 1000
export const FEEDBACK_MAX_AGE_MS = 90 * 24 * 3600 * 1000

export class FeedbackLimited extends Data.TaggedError("FeedbackLimited")<{
  readonly scope: "key" | "global"
  readonly retryAfterSeconds: number
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

const conflict = () =>
  new Conflict({ error: { code: "feedback_conflict", message: "A different feedback for this request was already recorded." } })

export class Feedback extends Effect.Service<Feedback>()("morsel/credits/Feedback", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { limits } = yield* AppConfig

    /** duplicate for an exact repeat, a conflict for a different one, nothing when there is none yet. */
    const existing = (fingerprint: string, submission: FeedbackSubmission) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ fingerprint: string; category: string; note: string }>`
          SELECT fingerprint, category, note FROM credit_feedback WHERE request_id = ${submission.requestId}`
        const row = rows[0]
        if (row === undefined) return "none" as const
        const same = row.fingerprint === fingerprint && row.category === submission.category && row.note === submission.note
        return same ? ("duplicate" as const) : yield* Effect.fail(conflict())
      })

    const submit = (fingerprint: string, submission: FeedbackSubmission) =>
      Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const now = new Date(nowMs)
        const oldestAllowed = new Date(nowMs - FEEDBACK_MAX_AGE_MS)
        const eligible = yield* sql<{ request_id: string }>`
          SELECT request_id FROM analysis_requests
          WHERE request_id = ${submission.requestId}
            AND payer = ${payerIdOf(fingerprint)}
            AND status IN ('paid', 'failed')
            AND created_at >= ${oldestAllowed}`
        if (eligible.length === 0) return yield* Effect.fail(notEligible())
        // An exact repeat is answered before the limits, so a retried submission never gets 429.
        if ((yield* existing(fingerprint, submission)) === "duplicate") return { duplicate: true }

        const windowStart = new Date(nowMs - FEEDBACK_WINDOW_MS)
        const inserted = yield* Effect.gen(function* () {
          // Serializes submissions so the per-key and global counts cannot be overtaken by a concurrent insert.
          yield* sql`SELECT pg_advisory_xact_lock(hashtext('morsel.credit_feedback'))`
          yield* sql`DELETE FROM credit_feedback WHERE created_at < ${oldestAllowed}`
          const [perKey] = yield* sql<{ n: number; oldest: Date | null }>`
            SELECT count(*)::int AS n, min(created_at) AS oldest FROM credit_feedback
            WHERE fingerprint = ${fingerprint} AND created_at > ${windowStart}`
          if (perKey !== undefined && perKey.n >= limits.feedbackPerKeyPerDay) {
            return yield* new FeedbackLimited({ scope: "key", retryAfterSeconds: retryAfter(perKey.oldest, nowMs) })
          }
          const [global] = yield* sql<{ n: number; oldest: Date | null }>`
            SELECT count(*)::int AS n, min(created_at) AS oldest FROM credit_feedback WHERE created_at > ${windowStart}`
          if (global !== undefined && global.n >= limits.feedbackGlobalPerDay) {
            return yield* new FeedbackLimited({ scope: "global", retryAfterSeconds: retryAfter(global.oldest, nowMs) })
          }
          return yield* sql<{ request_id: string }>`
            INSERT INTO credit_feedback (request_id, fingerprint, category, note, created_at)
            VALUES (${submission.requestId}, ${fingerprint}, ${submission.category}, ${submission.note}, ${now})
            ON CONFLICT (request_id) DO NOTHING
            RETURNING request_id`
        }).pipe(sql.withTransaction)
        if (inserted.length > 0) return { duplicate: false }
        // A concurrent submission for the same request won: same content is a duplicate, other content a conflict.
        return (yield* existing(fingerprint, submission)) === "duplicate" ? { duplicate: true } : yield* Effect.fail(conflict())
      })

    return { submit }
  })
}) {}

/** Seconds until the oldest submission in the window leaves it (at least 1). */
const retryAfter = (oldest: Date | null, nowMs: number) =>
  oldest === null ? 60 : Math.max(1, Math.ceil((oldest.getTime() + FEEDBACK_WINDOW_MS - nowMs) / 1000))
