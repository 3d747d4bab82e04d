/** What each admin procedure does, in SQL over the shared tables; never reads or returns a key, signature or result text. */
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, DateTime, Effect, Schema } from "effect"
import { PACK_CREDITS } from "../credits/Ledger.ts"
import { rowsOf } from "../db/rows.ts"
import { KeyFingerprint, PayerId, RequestId } from "../domain/ids.ts"
import { FundingKind } from "../domain/payer.ts"
import { ANALYSIS_PRICE_USD, roundUsd } from "../model/usage.ts"
import { X402Reconciler } from "../x402/Reconciler.ts"
import { AdminFailure, AdminRpcs, type Counters, FINGERPRINT_PREFIX_LENGTH, type PausedKey, type PendingSettlement, type RequestSummary } from "./AdminRpc.ts"

const DAY_MS = 24 * 60 * 60 * 1000

const prefixOf = (fingerprint: string) => fingerprint.slice(0, FINGERPRINT_PREFIX_LENGTH)
const utc = (date: Date) => DateTime.unsafeFromDate(date)
const count = (value: number | undefined) => value ?? 0

const pausedKeys = rowsOf(
  Schema.Struct({
    fingerprint: KeyFingerprint,
    available: Schema.Number,
    reserved: Schema.Number,
    blocked_reason: Schema.NullOr(Schema.String),
    updated_at: Schema.DateFromSelf,
    reversed: Schema.NullOr(Schema.String)
  })
)
const fingerprints = rowsOf(Schema.Struct({ fingerprint: KeyFingerprint }))
const balances = rowsOf(Schema.Struct({ available: Schema.Number }))
const pendingSettlements = rowsOf(
  Schema.Struct({
    request_id: RequestId,
    payer: Schema.String,
    amount: Schema.String,
    asset: Schema.String,
    network: Schema.String,
    state: Schema.String,
    tx_hash: Schema.NullOr(Schema.String),
    attempts: Schema.Number,
    valid_before: Schema.NumberFromString,
    created_at: Schema.DateFromSelf,
    updated_at: Schema.DateFromSelf
  })
)
const requestSummaries = rowsOf(
  Schema.Struct({
    request_id: RequestId,
    status: Schema.Literal("running", "paid", "failed", "payment_pending"),
    funding: FundingKind,
    payer: PayerId,
    created_at: Schema.DateFromSelf,
    completed_at: Schema.NullOr(Schema.DateFromSelf),
    failure_code: Schema.NullOr(Schema.String),
    result_stored: Schema.Boolean,
    payment_state: Schema.NullOr(Schema.String),
    tx_hash: Schema.NullOr(Schema.String),
    prompt_tokens: Schema.NullOr(Schema.Number),
    completion_tokens: Schema.NullOr(Schema.Number),
    reasoning_tokens: Schema.NullOr(Schema.Number),
    cached_tokens: Schema.NullOr(Schema.Number),
    model_seconds: Schema.NullOr(Schema.Number),
    model_output: Schema.NullOr(Schema.String),
    cost_usd: Schema.NullOr(Schema.Number)
  })
)
/** Sums and counts cast to float8 arrive as numbers; a sum over no value is NULL. */
const modelCounts = rowsOf(
  Schema.Struct({
    calls_day: Schema.Number,
    prompt_day: Schema.NullOr(Schema.Number),
    completion_day: Schema.NullOr(Schema.Number),
    reasoning_day: Schema.NullOr(Schema.Number),
    cached_day: Schema.NullOr(Schema.Number),
    priced_day: Schema.Number,
    cost_day: Schema.NullOr(Schema.Number),
    paid_priced_day: Schema.Number,
    priced_all: Schema.Number,
    cost_all: Schema.NullOr(Schema.Number),
    paid_priced_all: Schema.Number
  })
)

/** The counts that are there: `{ prompt: 812 }`, never a zero for a count no provider reported. */
const tokensOf = (counts: Record<"prompt" | "completion" | "reasoning" | "cached", number | null>) =>
  Object.fromEntries(Object.entries(counts).filter((entry): entry is [string, number] => entry[1] !== null))
/** count(*) is int8: it arrives as a string. */
const statusCounts = rowsOf(Schema.Struct({ status: Schema.String, n: Schema.NumberFromString }))
const creditCounts = rowsOf(
  Schema.Struct({
    granted_day: Schema.NumberFromString,
    consumed_day: Schema.NumberFromString,
    granted_all: Schema.NumberFromString,
    consumed_all: Schema.NumberFromString
  })
)
const settledCounts = rowsOf(Schema.Struct({ day: Schema.NumberFromString, total: Schema.NumberFromString }))

/** A database fault reaches the operator as a code, not as a defect with internals. */
const storage = <A, R>(effect: Effect.Effect<A, SqlError.SqlError | AdminFailure, R>) =>
  effect.pipe(
    Effect.catchTag("SqlError", (error) =>
      Effect.logError("admin call failed on the database", error).pipe(
        Effect.zipRight(new AdminFailure({ code: "storage_unavailable", message: "the database did not answer; retry" }))
      )
    )
  )

/** `key:<fingerprint prefix>` for a credit key; a wallet address is public and shown whole. */
const payerLabel = (payer: string) => (payer.startsWith("key:") ? `key:${prefixOf(payer.slice(4))}` : payer)

export const AdminHandlersLive = AdminRpcs.toLayer(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const reconciler = yield* X402Reconciler
    const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

    const listPausedKeys = Effect.gen(function* () {
      const rows = yield* pausedKeys(sql`
        SELECT a.fingerprint, a.available, a.reserved, a.blocked_reason, a.updated_at,
          (SELECT string_agg(o.order_id::text, ',' ORDER BY o.updated_at) FROM credit_orders o
           WHERE o.fingerprint = a.fingerprint AND o.state = 'reversed') AS reversed
        FROM credit_accounts a WHERE a.blocked ORDER BY a.updated_at DESC`)
      return rows.map(
        (r): PausedKey => ({
          fingerprint_prefix: prefixOf(r.fingerprint),
          available: r.available,
          reserved: r.reserved,
          reason: r.blocked_reason,
          paused_at: utc(r.updated_at),
          reversed_order_ids: r.reversed === null ? [] : r.reversed.split(",")
        })
      )
    })

    /** Lifts the pause only; the balance stays as the ledger has it (possibly below zero). */
    const unblockKey = (fingerprint: string) =>
      Effect.gen(function* () {
        const matches = yield* fingerprints(sql`
          SELECT fingerprint FROM credit_accounts WHERE starts_with(fingerprint, ${fingerprint}) LIMIT 2`)
        const match = matches[0]
        if (match === undefined) return yield* new AdminFailure({ code: "not_found", message: "no key has this fingerprint" })
        if (matches.length > 1) {
          return yield* new AdminFailure({ code: "ambiguous_fingerprint", message: "more than one key starts with this prefix; give more characters" })
        }
        const at = yield* now
        const updated = yield* balances(sql`
          UPDATE credit_accounts SET blocked = false, blocked_reason = NULL, updated_at = ${at}
          WHERE fingerprint = ${match.fingerprint} AND blocked
          RETURNING available`)
        const row = updated[0]
        if (row !== undefined) {
          yield* Effect.logInfo("credit key unblocked by an operator", { fingerprint_prefix: prefixOf(match.fingerprint) })
          return { fingerprint_prefix: prefixOf(match.fingerprint), available: row.available, was_blocked: true }
        }
        const current = yield* balances(sql`SELECT available FROM credit_accounts WHERE fingerprint = ${match.fingerprint}`)
        return { fingerprint_prefix: prefixOf(match.fingerprint), available: current[0]?.available ?? 0, was_blocked: false }
      })

    const listPendingSettlements = Effect.gen(function* () {
      const rows = yield* pendingSettlements(sql`
        SELECT r.request_id, p.payer, p.amount, p.asset, p.network, p.state, p.tx_hash, p.attempts, p.valid_before,
          r.created_at, p.updated_at
        FROM analysis_requests r JOIN x402_payments p USING (request_id)
        WHERE r.status = 'payment_pending' ORDER BY r.created_at`)
      return rows.map(
        (r): PendingSettlement => ({
          request_id: r.request_id,
          payer: r.payer,
          amount: r.amount,
          asset: r.asset,
          network: r.network,
          payment_state: r.state,
          tx_hash: r.tx_hash,
          attempts: r.attempts,
          valid_until: utc(new Date(r.valid_before * 1000)),
          created_at: utc(r.created_at),
          updated_at: utc(r.updated_at)
        })
      )
    })

    const reconcileNow = Effect.map(reconciler.runOnce, (pass) => ({
      examined: pass.examined,
      settled: pass.settled.map((s) => s.requestId),
      failed: pass.failed.map((f) => ({ request_id: f.requestId, reason: f.reason })),
      still_pending: pass.pending
    }))

    const lookupRequest = (requestId: RequestId) =>
      Effect.gen(function* () {
        const rows = yield* requestSummaries(sql`
          SELECT r.request_id, r.status, r.funding, r.payer, r.created_at, r.completed_at, r.failure_code,
            (r.result IS NOT NULL) AS result_stored, p.state AS payment_state, p.tx_hash,
            m.prompt_tokens, m.completion_tokens, m.reasoning_tokens, m.cached_tokens, m.seconds AS model_seconds,
            m.output AS model_output, m.cost_usd
          FROM analysis_requests r LEFT JOIN x402_payments p USING (request_id) LEFT JOIN model_calls m USING (request_id)
          WHERE r.request_id = ${requestId}`)
        const r = rows[0]
        if (r === undefined) return yield* new AdminFailure({ code: "not_found", message: "no analysis request has this request_id" })
        return {
          request_id: r.request_id,
          status: r.status,
          payer_kind: r.funding,
          payer: payerLabel(r.payer),
          created_at: utc(r.created_at),
          completed_at: r.completed_at === null ? null : utc(r.completed_at),
          failure_code: r.failure_code,
          result_stored: r.result_stored,
          payment: r.payment_state === null ? null : { state: r.payment_state, tx_hash: r.tx_hash },
          ...(r.model_seconds === null || r.model_output === null
            ? {}
            : {
                model_call: {
                  tokens: tokensOf({ prompt: r.prompt_tokens, completion: r.completion_tokens, reasoning: r.reasoning_tokens, cached: r.cached_tokens }),
                  seconds: r.model_seconds,
                  output: r.model_output,
                  ...(r.cost_usd === null ? {} : { cost_usd: r.cost_usd })
                }
              })
        } satisfies RequestSummary
      })

    const counters = Effect.gen(function* () {
      const at = yield* now
      const since = new Date(at.getTime() - DAY_MS)
      const byStatus = yield* statusCounts(sql`
        SELECT status, count(*) AS n FROM analysis_requests WHERE created_at > ${since} GROUP BY status`)
      const credits = yield* creditCounts(sql`
        SELECT
          count(*) FILTER (WHERE kind = 'grant' AND created_at > ${since}) AS granted_day,
          count(*) FILTER (WHERE kind = 'consume' AND created_at > ${since}) AS consumed_day,
          count(*) FILTER (WHERE kind = 'grant') AS granted_all,
          count(*) FILTER (WHERE kind = 'consume') AS consumed_all
        FROM credit_entries WHERE kind IN ('grant', 'consume')`)
      const settled = yield* settledCounts(sql`
        SELECT count(*) FILTER (WHERE updated_at > ${since}) AS day, count(*) AS total
        FROM x402_payments WHERE state = 'settled'`)
      const model = yield* modelCounts(sql`
        SELECT
          (count(*) FILTER (WHERE m.created_at > ${since}))::float8 AS calls_day,
          (sum(m.prompt_tokens) FILTER (WHERE m.created_at > ${since}))::float8 AS prompt_day,
          (sum(m.completion_tokens) FILTER (WHERE m.created_at > ${since}))::float8 AS completion_day,
          (sum(m.reasoning_tokens) FILTER (WHERE m.created_at > ${since}))::float8 AS reasoning_day,
          (sum(m.cached_tokens) FILTER (WHERE m.created_at > ${since}))::float8 AS cached_day,
          (count(m.cost_usd) FILTER (WHERE m.created_at > ${since}))::float8 AS priced_day,
          sum(m.cost_usd) FILTER (WHERE m.created_at > ${since}) AS cost_day,
          (count(*) FILTER (WHERE m.created_at > ${since} AND m.cost_usd IS NOT NULL AND r.status = 'paid'))::float8 AS paid_priced_day,
          count(m.cost_usd)::float8 AS priced_all,
          sum(m.cost_usd) AS cost_all,
          (count(*) FILTER (WHERE m.cost_usd IS NOT NULL AND r.status = 'paid'))::float8 AS paid_priced_all
        FROM model_calls m JOIN analysis_requests r USING (request_id)`)
      const m = model[0]
      const statusCount = (status: string) => count(byStatus.find((row) => row.status === status)?.n)
      return {
        since: utc(since),
        requests_last_24h: {
          running: statusCount("running"),
          paid: statusCount("paid"),
          failed: statusCount("failed"),
          payment_pending: statusCount("payment_pending")
        },
        credits: {
          granted_last_24h: count(credits[0]?.granted_day) * PACK_CREDITS,
          consumed_last_24h: count(credits[0]?.consumed_day),
          granted_total: count(credits[0]?.granted_all) * PACK_CREDITS,
          consumed_total: count(credits[0]?.consumed_all)
        },
        x402: { settled_last_24h: count(settled[0]?.day), settled_total: count(settled[0]?.total) },
        model: {
          calls_last_24h: count(m?.calls_day),
          tokens_last_24h: tokensOf({
            prompt: m?.prompt_day ?? null,
            completion: m?.completion_day ?? null,
            reasoning: m?.reasoning_day ?? null,
            cached: m?.cached_day ?? null
          }),
          priced_calls_last_24h: count(m?.priced_day),
          // Without prices there is no cost, and so no margin: never a guess.
          ...(m === undefined || m.priced_day === 0 || m.cost_day === null
            ? {}
            : {
                cost_usd_last_24h: roundUsd(m.cost_day),
                revenue_usd_last_24h: roundUsd(m.paid_priced_day * ANALYSIS_PRICE_USD),
                margin_usd_last_24h: roundUsd(m.paid_priced_day * ANALYSIS_PRICE_USD - m.cost_day)
              }),
          ...(m === undefined || m.priced_all === 0 || m.cost_all === null
            ? {}
            : { cost_usd_total: roundUsd(m.cost_all), margin_usd_total: roundUsd(m.paid_priced_all * ANALYSIS_PRICE_USD - m.cost_all) })
        }
      } satisfies Counters
    })

    return {
      ListPausedKeys: () => storage(listPausedKeys),
      UnblockKey: ({ fingerprint }) => storage(unblockKey(fingerprint)),
      ListPendingSettlements: () => storage(listPendingSettlements),
      ReconcileNow: () => reconcileNow,
      LookupRequest: ({ request_id }) => storage(lookupRequest(RequestId.make(request_id))),
      Counters: () => storage(counters)
    }
  })
)
