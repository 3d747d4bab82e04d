/**
 * The credit ledger: insert-only entries plus one balance row per key, both changed in one transaction.
 *
 * Invariants (enforced by migration 0003's constraints and by the conditional updates below):
 * - For every key, `available` = Σ available_delta and `reserved` = Σ reserved_delta of its entries;
 *   every write inserts its entry and updates the balance row in the same transaction.
 * - One grant per order; an order's reversals and restorations alternate, numbered by `cycle` (unique per order
 *   and kind), and an order is reversed exactly while one of its recorded refunds or disputes takes the money back.
 * - One reserve entry per reservation, and at most one held-or-consumed reservation per analysis request_id.
 * - Exactly one consume-or-release per reservation: the `held → consumed|released` update is conditional,
 *   and a unique index admits only one settlement entry per reservation.
 * - A reserve only succeeds through `UPDATE … WHERE available >= 1 AND NOT blocked`, so concurrent
 *   reserves never overdraw; only a reversal may take `available` below zero, and it blocks the key until
 *   no order of the key is reversed any more (or an operator lifts it).
 * - Credits never expire; nothing here runs on a timer.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Context, Data, Effect, Layer, Metric, Option } from "effect"
import { countRows } from "../db/rows.ts"
import type { KeyFingerprint, OrderId } from "../domain/ids.ts"
import { Ids } from "../ids.ts"
import { creditsGranted } from "../observability/metrics.ts"
import { type Account, accounts, entryIds, fingerprints, type HeldReservation, kinds, reservationIds, reservations, states } from "./ledgerRows.ts"

export type { Account, HeldReservation } from "./ledgerRows.ts"

/** Credits in one pack bought for USD 5.00. */
export const PACK_CREDITS: 500 = 500

/** What callers may show: `credits_remaining` never goes below zero even when a reversal overdrew the key. */
export const creditsRemaining = (account: Account): number => Math.max(0, account.available)

export class ReserveRefused extends Data.TaggedError("ReserveRefused")<{
  readonly reason: "insufficient_credits" | "key_paused" | "unknown_key"
}> {}

export class ReservationConflict extends Data.TaggedError("ReservationConflict")<{ readonly requestId: string }> {}

/** A refund or dispute of an order as last reported by the processor. */
export interface ReversalCause {
  /** The processor's id of the refund or dispute. */
  readonly id: string
  readonly kind: "refund" | "dispute"
  readonly status: string
  /** How far the cause has gone; a report with a lower stage than the recorded one is stale. */
  readonly stage: number
  /** Whether the cause takes the money back (a pending or succeeded refund, an open or lost dispute). */
  readonly reverses: boolean
}

type SettleOutcome = "settled" | "already_consumed" | "already_released" | "unknown"

export class Ledger extends Context.Tag("morsel/credits/Ledger")<
  Ledger,
  {
    readonly account: (fingerprint: KeyFingerprint) => Effect.Effect<Option.Option<Account>, SqlError.SqlError>
    /** Whether the key was ever granted a paid pack (a refunded one too); a key that only opened checkouts has not. */
    readonly hasPaid: (fingerprint: KeyFingerprint) => Effect.Effect<boolean, SqlError.SqlError>
    /** Makes the key known (its first checkout); a no-op when it already is. Call inside the order's transaction. */
    readonly openAccount: (fingerprint: KeyFingerprint) => Effect.Effect<void, SqlError.SqlError>
    /** Gives back credits held for analyses no longer running, once `olderThan` has passed; how many. */
    readonly releaseOrphans: (olderThan: Date) => Effect.Effect<number, SqlError.SqlError>
    /** Grants the pack of a verified paid order exactly once and marks the order paid; true when this call granted. */
    readonly grant: (orderId: OrderId, fingerprint: KeyFingerprint) => Effect.Effect<boolean, SqlError.SqlError>
    /** Records a refund or dispute of the order and reverses or restores it accordingly. */
    readonly applyCause: (
      orderId: OrderId,
      fingerprint: KeyFingerprint,
      cause: ReversalCause
    ) => Effect.Effect<"reversed" | "restored" | "unchanged", SqlError.SqlError>
    /** Holds one credit of `fingerprint` for the analysis `requestId` (the same reservation when repeated). */
    readonly reserve: (
      fingerprint: KeyFingerprint,
      requestId: string
    ) => Effect.Effect<HeldReservation, ReserveRefused | ReservationConflict | SqlError.SqlError>
    /** Consumes a held credit; idempotent (a second call, or one after release, changes nothing). */
    readonly consume: (reservationId: string) => Effect.Effect<SettleOutcome, SqlError.SqlError>
    /** Returns a held credit; idempotent (a second call, or one after consume, changes nothing). */
    readonly release: (reservationId: string) => Effect.Effect<SettleOutcome, SqlError.SqlError>
    /** Releases whatever credit the analysis `requestId` still holds (an attempt abandoned mid-analysis). */
    readonly releaseRequest: (requestId: string) => Effect.Effect<void, SqlError.SqlError>
  }
>() {}

const now = Clock.currentTimeMillis.pipe(Effect.map((ms) => new Date(ms)))

export const LedgerLive = Layer.effect(
  Ledger,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const account = (fingerprint: KeyFingerprint) =>
      accounts(sql`
        SELECT fingerprint, available, reserved, blocked FROM credit_accounts WHERE fingerprint = ${fingerprint}`).pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    const hasPaid = (fingerprint: KeyFingerprint) =>
      Effect.map(
        entryIds(sql`SELECT entry_id::text FROM credit_entries WHERE fingerprint = ${fingerprint} AND kind = 'grant' LIMIT 1`),
        (rows) => rows.length > 0
      )

    /** Makes the key known (its first checkout); a no-op when it already is. Call inside the order's transaction. */
    const openAccount = (fingerprint: KeyFingerprint) =>
      Effect.gen(function* () {
        const at = yield* now
        yield* sql`
          INSERT INTO credit_accounts (fingerprint, created_at, updated_at) VALUES (${fingerprint}, ${at}, ${at})
          ON CONFLICT (fingerprint) DO NOTHING`
      })

    /** Adds one pack for `orderId` unless that order was granted before; true when this call granted. */
    const grantInTransaction = (orderId: OrderId, fingerprint: KeyFingerprint, at: Date) =>
      Effect.gen(function* () {
        const inserted = yield* entryIds(sql`
          INSERT INTO credit_entries (fingerprint, kind, order_id, available_delta, reserved_delta, created_at)
          VALUES (${fingerprint}, 'grant', ${orderId}, ${PACK_CREDITS}, 0, ${at})
          ON CONFLICT (order_id) WHERE kind = 'grant' DO NOTHING
          RETURNING entry_id`)
        if (inserted.length === 0) return false
        yield* sql`
          UPDATE credit_accounts SET available = available + ${PACK_CREDITS}, updated_at = ${at}
          WHERE fingerprint = ${fingerprint}`
        return true
      })

    /** Locks the order's row: every change of an order's state (grant, reversal, restoration) runs under it. */
    const lockOrder = (orderId: OrderId) =>
      states(sql`SELECT state FROM credit_orders WHERE order_id = ${orderId} FOR UPDATE`).pipe(Effect.map((rows) => rows[0]?.state))

    /** Grants the pack of a verified paid order exactly once and marks the order paid. */
    const grant = (orderId: OrderId, fingerprint: KeyFingerprint) =>
      Effect.gen(function* () {
        const at = yield* now
        yield* lockOrder(orderId)
        const granted = yield* grantInTransaction(orderId, fingerprint, at)
        yield* sql`
          UPDATE credit_orders SET state = 'paid', updated_at = ${at}
          WHERE order_id = ${orderId} AND state NOT IN ('paid', 'reversed')`
        return granted
      }).pipe(
        sql.withTransaction,
        Effect.tap((granted) => (granted ? Metric.incrementBy(creditsGranted, PACK_CREDITS) : Effect.void))
      )

    /** The next cycle number of an order's `kind` entries (reversal or restoration). */
    const nextCycle = (orderId: OrderId, kind: "reversal" | "restoration") =>
      countRows(sql`SELECT count(*)::int AS n FROM credit_entries WHERE order_id = ${orderId} AND kind = ${kind}`).pipe(
        Effect.map((rows) => (rows[0]?.n ?? 0) + 1)
      )

    /** The first recorded cause of the order that still takes the money back. */
    const holdingCause = (orderId: OrderId) =>
      kinds(sql`
        SELECT kind FROM credit_reversal_causes WHERE order_id = ${orderId} AND reverses ORDER BY updated_at LIMIT 1`).pipe(
        Effect.map((rows) => rows[0])
      )

    /**
     * Records what a refund or dispute of the order now says, then makes the order agree with its causes: it is
     * reversed (pack taken back, key paused) while any cause still takes the money back, and restored (a
     * compensating +500, back to paid) once none does. A cause only moves forward (`stage`), so duplicated or
     * out-of-order webhooks change nothing twice. A refund proves a payment: an order whose grant had not
     * arrived yet is granted and reversed together. The order row, then the account row, is locked first.
     */
    const applyCause = (orderId: OrderId, fingerprint: KeyFingerprint, cause: ReversalCause) =>
      Effect.gen(function* () {
        const at = yield* now
        const state = yield* lockOrder(orderId)
        yield* sql`SELECT fingerprint FROM credit_accounts WHERE fingerprint = ${fingerprint} FOR UPDATE`
        yield* sql`
          INSERT INTO credit_reversal_causes (cause_id, order_id, kind, status, stage, reverses, updated_at)
          VALUES (${cause.id}, ${orderId}, ${cause.kind}, ${cause.status}, ${cause.stage}, ${cause.reverses}, ${at})
          ON CONFLICT (cause_id) DO UPDATE
          SET status = EXCLUDED.status, stage = EXCLUDED.stage, reverses = EXCLUDED.reverses, updated_at = EXCLUDED.updated_at
          WHERE credit_reversal_causes.stage < EXCLUDED.stage`
        const holding = yield* holdingCause(orderId)
        if (holding !== undefined && state !== "reversed") {
          yield* grantInTransaction(orderId, fingerprint, at)
          const cycle = yield* nextCycle(orderId, "reversal")
          yield* sql`
            INSERT INTO credit_entries (fingerprint, kind, order_id, available_delta, reserved_delta, cycle, created_at)
            VALUES (${fingerprint}, 'reversal', ${orderId}, ${-PACK_CREDITS}, 0, ${cycle}, ${at})`
          yield* sql`UPDATE credit_orders SET state = 'reversed', updated_at = ${at} WHERE order_id = ${orderId}`
          yield* sql`
            UPDATE credit_accounts
            SET available = available - ${PACK_CREDITS}, blocked = true, blocked_reason = ${holding.kind}, updated_at = ${at}
            WHERE fingerprint = ${fingerprint}`
          return "reversed" as const
        }
        if (holding === undefined && state === "reversed") {
          const cycle = yield* nextCycle(orderId, "restoration")
          yield* sql`
            INSERT INTO credit_entries (fingerprint, kind, order_id, available_delta, reserved_delta, cycle, created_at)
            VALUES (${fingerprint}, 'restoration', ${orderId}, ${PACK_CREDITS}, 0, ${cycle}, ${at})`
          yield* sql`UPDATE credit_orders SET state = 'paid', updated_at = ${at} WHERE order_id = ${orderId}`
          yield* sql`
            UPDATE credit_accounts SET available = available + ${PACK_CREDITS}, updated_at = ${at} WHERE fingerprint = ${fingerprint}`
          // The pause is lifted only when no other order of the key is still reversed (refunded or disputed).
          const [stillReversed] = yield* sql`
            SELECT 1 FROM credit_orders WHERE fingerprint = ${fingerprint} AND state = 'reversed' LIMIT 1`
          if (stillReversed === undefined) {
            yield* sql`UPDATE credit_accounts SET blocked = false, blocked_reason = NULL WHERE fingerprint = ${fingerprint}`
          }
          return "restored" as const
        }
        return "unchanged" as const
      }).pipe(sql.withTransaction)

    const reservationFor = (requestId: string) =>
      reservations(sql`
        SELECT reservation_id AS "reservationId", request_id AS "requestId", fingerprint, state
        FROM credit_reservations WHERE request_id = ${requestId} AND state IN ('held', 'consumed')`).pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    /**
     * Takes one available credit of an unpaused key into reserved and records the reservation with its entry: one
     * statement, so one round trip and no transaction to open. No row when there is no credit to take; a unique
     * violation (the request holds a credit already) undoes the whole statement, the debit with it.
     */
    const tryReserve = (fingerprint: KeyFingerprint, requestId: string, reservationId: string, at: Date) =>
      reservationIds(sql`
        WITH debited AS (
          UPDATE credit_accounts SET available = available - 1, reserved = reserved + 1, updated_at = ${at}
          WHERE fingerprint = ${fingerprint} AND NOT blocked AND available >= 1
          RETURNING fingerprint),
        held AS (
          INSERT INTO credit_reservations (reservation_id, request_id, fingerprint, state, created_at)
          SELECT ${reservationId}::uuid, ${requestId}::uuid, fingerprint, 'held', ${at}::timestamptz FROM debited
          RETURNING reservation_id, fingerprint),
        entry AS (
          INSERT INTO credit_entries (fingerprint, kind, reservation_id, available_delta, reserved_delta, created_at)
          SELECT fingerprint, 'reserve', reservation_id, -1, 1, ${at}::timestamptz FROM held)
        SELECT reservation_id FROM held`)

    /** The reservation `requestId` holds (or consumed) already, when it is this key's; a conflict when another key's. */
    const existingFor = (fingerprint: KeyFingerprint, requestId: string) =>
      Effect.flatMap(reservationFor(requestId), (existing) =>
        Option.isSome(existing) && existing.value.fingerprint !== fingerprint
          ? Effect.fail(new ReservationConflict({ requestId }))
          : Effect.succeed(existing)
      )

    /**
     * Holds one credit of `fingerprint` for the analysis `requestId`. Repeating it for a request that already
     * holds (or consumed) a credit returns that reservation instead of reserving twice.
     */
    const reserve = (
      fingerprint: KeyFingerprint,
      requestId: string
    ): Effect.Effect<HeldReservation, ReserveRefused | ReservationConflict | SqlError.SqlError> =>
      Effect.gen(function* () {
        const at = yield* now
        const reservationId = yield* Ids.next
        const held = yield* tryReserve(fingerprint, requestId, reservationId, at).pipe(
          // The request holds a credit already (this call repeated, or a concurrent one won): it is answered below.
          Effect.catchIf(isUniqueViolation, () => Effect.succeed([]))
        )
        if (held.length > 0) return { reservationId, requestId, fingerprint, state: "held" } satisfies HeldReservation
        // No credit taken: a request that holds one already (its key may have none left), or a refusal.
        const existing = yield* existingFor(fingerprint, requestId)
        if (Option.isSome(existing)) return existing.value
        const current = yield* account(fingerprint)
        return yield* new ReserveRefused({
          reason: Option.match(current, {
            onNone: () => "unknown_key" as const,
            onSome: (a) => (a.blocked ? ("key_paused" as const) : ("insufficient_credits" as const))
          })
        })
      })

    const reservationState = (reservationId: string) =>
      states(sql`SELECT state FROM credit_reservations WHERE reservation_id = ${reservationId}`).pipe(
        Effect.map((rows) => rows[0]?.state)
      )

    /**
     * Moves a held reservation to `to` with its entry and the key's balance: one statement, so one round trip (inside
     * the caller's transaction when there is one). Nothing changes when the reservation is not held.
     */
    const settle = (reservationId: string, to: "consumed" | "released"): Effect.Effect<SettleOutcome, SqlError.SqlError> =>
      Effect.gen(function* () {
        const at = yield* now
        const returned = to === "released" ? 1 : 0
        const moved = yield* fingerprints(sql`
          WITH moved AS (
            UPDATE credit_reservations SET state = ${to}, settled_at = ${at}
            WHERE reservation_id = ${reservationId} AND state = 'held'
            RETURNING fingerprint),
          entry AS (
            INSERT INTO credit_entries (fingerprint, kind, reservation_id, available_delta, reserved_delta, created_at)
            SELECT fingerprint, ${to === "consumed" ? "consume" : "release"}::text, ${reservationId}::uuid, ${returned}::integer, -1, ${at}::timestamptz FROM moved),
          balance AS (
            UPDATE credit_accounts SET available = available + ${returned}::integer, reserved = reserved - 1, updated_at = ${at}
            WHERE fingerprint IN (SELECT fingerprint FROM moved))
          SELECT fingerprint FROM moved`)
        if (moved.length > 0) return "settled" as const
        const state = yield* reservationState(reservationId)
        return state === "consumed" ? "already_consumed" : state === "released" ? "already_released" : "unknown"
      })

    /** Releases whatever credit the analysis `requestId` still holds (an attempt abandoned mid-analysis). */
    const heldFor = (requestId: string) =>
      reservationIds(sql`SELECT reservation_id FROM credit_reservations WHERE request_id = ${requestId} AND state = 'held'`)

    const releaseRequest = (requestId: string) =>
      Effect.gen(function* () {
        const held = yield* heldFor(requestId)
        for (const r of held) yield* settle(r.reservation_id, "released")
      })

    /**
     * Returns credits still held for analyses that are no longer running (closed, failed or never recorded)
     * once `olderThan` has passed: what a failed release or a lost answer to a reservation left behind.
     */
    const orphansBefore = (olderThan: Date) =>
      reservationIds(sql`
        SELECT r.reservation_id FROM credit_reservations r
        LEFT JOIN analysis_requests a ON a.request_id = r.request_id
        WHERE r.state = 'held' AND r.created_at < ${olderThan} AND (a.request_id IS NULL OR a.status <> 'running')`)

    const releaseOrphans = (olderThan: Date) =>
      Effect.gen(function* () {
        const orphans = yield* orphansBefore(olderThan)
        for (const r of orphans) yield* settle(r.reservation_id, "released")
        return orphans.length
      })

    return Ledger.of({
      account,
      hasPaid,
      openAccount,
      releaseOrphans,
      grant,
      applyCause,
      reserve,
      consume: (reservationId) => settle(reservationId, "consumed"),
      release: (reservationId) => settle(reservationId, "released"),
      releaseRequest
    })
  })
)

/** PostgreSQL unique_violation (23505), as surfaced by @effect/sql-pg. */
export const isUniqueViolation = (error: unknown): boolean => {
  if (typeof error !== "object" || error === null || !("cause" in error)) return false
  const cause = error.cause
  return typeof cause === "object" && cause !== null && "code" in cause && cause.code === "23505"
}
