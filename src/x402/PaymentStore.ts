/** The x402 payment records in PostgreSQL: claims of single-use authorizations, submissions and outcomes. */
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Context, Data, Effect, Layer, Option, Schema } from "effect"
import type { Hex } from "viem"
import { rowsOf } from "../db/rows.ts"
import { RequestId } from "../domain/ids.ts"
import { HexString } from "./protocol.ts"

const PaymentState = Schema.Literal("claimed", "submitted", "settled", "failed")
export type PaymentState = typeof PaymentState.Type

/** What a claim records: the authorization's terms, identified by its EIP-712 digest (never the signature). */
export interface NewClaim {
  readonly requestId: RequestId
  readonly payer: string
  readonly asset: string
  readonly network: string
  readonly payTo: string
  readonly amount: string
  readonly nonce: Hex
  readonly digest: Hex
  /** Unix seconds; after it the token refuses the authorization. */
  readonly validBefore: bigint
  /** A block no later than any spend of the authorization (the head before verification, less a margin). */
  readonly fromBlock: bigint
  /** The signed payment (PAYMENT-SIGNATURE encoding), kept until the payment is final so anyone may submit it. */
  readonly paymentPayload: string
}

export interface PaymentRecord extends Omit<NewClaim, "paymentPayload"> {
  readonly state: PaymentState
  readonly settledBy: Option.Option<"self" | "facilitator">
  readonly txHash: Option.Option<Hex>
  readonly rawTransaction: Option.Option<Hex>
  readonly paymentPayload: Option.Option<string>
  readonly paymentResponse: Option.Option<string>
  readonly failureReason: Option.Option<string>
  readonly attempts: number
  readonly updatedAt: Date
}

/** The authorization is already claimed by another request. */
export class AuthorizationTaken extends Data.TaggedError("AuthorizationTaken")<{ readonly requestId: RequestId }> {}

/** The request already pays with another authorization that is past the point of no return. */
export class RequestPaidOtherwise extends Data.TaggedError("RequestPaidOtherwise")<{ readonly state: PaymentState }> {}

/** A row of `x402_payments` (`columns` below); its int8 columns arrive as strings. */
const Row = Schema.Struct({
  request_id: RequestId,
  payer: Schema.String,
  asset: Schema.String,
  network: Schema.String,
  pay_to: Schema.String,
  amount: Schema.String,
  auth_nonce: HexString,
  authorization_digest: HexString,
  valid_before: Schema.BigInt,
  state: PaymentState,
  settled_by: Schema.NullOr(Schema.Literal("self", "facilitator")),
  tx_hash: Schema.NullOr(HexString),
  from_block: Schema.BigInt,
  raw_transaction: Schema.NullOr(HexString),
  payment_payload: Schema.NullOr(Schema.String),
  payment_response: Schema.NullOr(Schema.String),
  failure_reason: Schema.NullOr(Schema.String),
  attempts: Schema.Number,
  updated_at: Schema.DateFromSelf
})
type Row = typeof Row.Type
const paymentRows = rowsOf(Row)
const requestIds = rowsOf(Schema.Struct({ request_id: RequestId }))

const toRecord = (r: Row): PaymentRecord => ({
  requestId: r.request_id,
  payer: r.payer,
  asset: r.asset,
  network: r.network,
  payTo: r.pay_to,
  amount: r.amount,
  nonce: r.auth_nonce,
  digest: r.authorization_digest,
  validBefore: r.valid_before,
  state: r.state,
  settledBy: Option.fromNullable(r.settled_by),
  txHash: Option.fromNullable(r.tx_hash),
  fromBlock: r.from_block,
  rawTransaction: Option.fromNullable(r.raw_transaction),
  paymentPayload: Option.fromNullable(r.payment_payload),
  paymentResponse: Option.fromNullable(r.payment_response),
  failureReason: Option.fromNullable(r.failure_reason),
  attempts: r.attempts,
  updatedAt: r.updated_at
})

export class PaymentStore extends Context.Tag("morsel/x402/PaymentStore")<
  PaymentStore,
  {
    readonly get: (requestId: RequestId) => Effect.Effect<Option.Option<PaymentRecord>, SqlError.SqlError>
    /** Which request holds this authorization, if any. */
    readonly holder: (asset: string, payer: string, nonce: Hex) => Effect.Effect<Option.Option<RequestId>, SqlError.SqlError>
    /**
     * Claim the authorization for the request. Idempotent for the same request and authorization; a claim
     * of the same request with another authorization replaces it while nothing was submitted.
     */
    readonly claim: (c: NewClaim) => Effect.Effect<PaymentRecord, AuthorizationTaken | RequestPaidOtherwise | SqlError.SqlError>
    /** Forget a claim on which nothing was submitted; true when one was removed. */
    readonly release: (requestId: RequestId) => Effect.Effect<boolean, SqlError.SqlError>
    /**
     * Forget claims on which nothing was submitted and whose analysis request failed (their release failed, or the
     * instance died before it): the given request's, or all of them. Returns the requests released.
     */
    readonly releaseAbandoned: (requestId: Option.Option<RequestId>) => Effect.Effect<ReadonlyArray<RequestId>, SqlError.SqlError>
    /**
     * The single point of submission: claimed → submitted, with the transaction hash when it is known
     * before broadcast. Exactly one caller wins; the others get None.
     */
    readonly markSubmitted: (
      requestId: RequestId,
      submission: {
        readonly by: "self" | "facilitator"
        readonly txHash: Option.Option<Hex>
        readonly rawTransaction: Option.Option<Hex>
      }
    ) => Effect.Effect<Option.Option<PaymentRecord>, SqlError.SqlError>
    /** Record the transaction that now carries a submitted payment (a later hash from a facilitator, a re-signed transfer). */
    readonly recordTransaction: (
      requestId: RequestId,
      tx: { readonly txHash: Hex; readonly rawTransaction: Option.Option<Hex> }
    ) => Effect.Effect<void, SqlError.SqlError>
    readonly markSettled: (requestId: RequestId, txHash: Hex, paymentResponse: string) => Effect.Effect<PaymentRecord, SqlError.SqlError>
    readonly markFailed: (requestId: RequestId, reason: string) => Effect.Effect<PaymentRecord, SqlError.SqlError>
    readonly countAttempt: (requestId: RequestId) => Effect.Effect<void, SqlError.SqlError>
    /** Mark the payment as being worked on now, so the reconciler leaves it to its request for a while. */
    readonly touch: (requestId: RequestId) => Effect.Effect<void, SqlError.SqlError>
    /**
     * Lease one payment due for reconciliation until `until`, so no other instance works it meanwhile: a submitted
     * payment untouched since `before`, or any payment whose request still waits on it (a claim never sent, or a
     * settled or failed payment whose request was not updated: a crash or a failed write between the two).
     */
    readonly takeDue: (before: Date, until: Date) => Effect.Effect<Option.Option<PaymentRecord>, SqlError.SqlError>
    /** Give up the reconciliation lease on a payment. */
    readonly endLease: (requestId: RequestId) => Effect.Effect<void, SqlError.SqlError>
  }
>() {}

const columns = `request_id, payer, asset, network, pay_to, amount, auth_nonce, authorization_digest, valid_before, state,
  settled_by, tx_hash, from_block, raw_transaction, payment_payload, payment_response, failure_reason, attempts, updated_at`

export const PaymentStoreLive = Layer.effect(
  PaymentStore,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
    const cols = sql.literal(columns)

    const get = (requestId: RequestId) =>
      paymentRows(sql`SELECT ${cols} FROM x402_payments WHERE request_id = ${requestId}`).pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map(toRecord)))
      )

    const one = (rows: ReadonlyArray<Row>, what: string) =>
      rows[0] ? Effect.succeed(toRecord(rows[0])) : Effect.dieMessage(`x402 payment row vanished while ${what}`)

    const claim = (c: NewClaim): Effect.Effect<PaymentRecord, AuthorizationTaken | RequestPaidOtherwise | SqlError.SqlError> =>
      Effect.gen(function* () {
        const at = yield* now
        // ON CONFLICT DO NOTHING covers both keys: the request's row and the authorization's row.
        const inserted = yield* paymentRows(sql`
          INSERT INTO x402_payments (request_id, payer, asset, network, pay_to, amount, auth_nonce, authorization_digest,
            valid_before, from_block, payment_payload, state, created_at, updated_at)
          VALUES (${c.requestId}, ${c.payer}, ${c.asset}, ${c.network}, ${c.payTo}, ${c.amount}, ${c.nonce}, ${c.digest},
            ${c.validBefore.toString()}, ${c.fromBlock.toString()}, ${c.paymentPayload}, 'claimed', ${at}, ${at})
          ON CONFLICT DO NOTHING
          RETURNING ${cols}`)
        if (inserted[0]) return toRecord(inserted[0])
        const holderOf = yield* requestIds(sql`
          SELECT request_id FROM x402_payments WHERE asset = ${c.asset} AND payer = ${c.payer} AND auth_nonce = ${c.nonce}`)
        const held = holderOf[0]?.request_id
        if (held !== undefined && held !== c.requestId) return yield* Effect.fail(new AuthorizationTaken({ requestId: held }))
        const existing = yield* get(c.requestId)
        if (Option.isNone(existing)) {
          // Released between the insert and the look-up: claim again.
          return yield* claim(c)
        }
        const row = existing.value
        if (row.digest === c.digest) return row
        if (row.state !== "claimed") return yield* Effect.fail(new RequestPaidOtherwise({ state: row.state }))
        const replaced = yield* paymentRows(
          sql`
          UPDATE x402_payments SET payer = ${c.payer}, asset = ${c.asset}, network = ${c.network}, pay_to = ${c.payTo},
            amount = ${c.amount}, auth_nonce = ${c.nonce}, authorization_digest = ${c.digest},
            valid_before = ${c.validBefore.toString()}, from_block = ${c.fromBlock.toString()},
            payment_payload = ${c.paymentPayload}, updated_at = ${at}
          WHERE request_id = ${c.requestId} AND state = 'claimed'
          RETURNING ${cols}`.pipe(
            Effect.catchIf(
              (e) => /unique|duplicate|23505/i.test(String(e.cause ?? e.message)),
              () => Effect.succeed([])
            )
          )
        )
        if (replaced[0]) return toRecord(replaced[0])
        return yield* claim(c)
      })

    return {
      get,
      holder: (asset, payer, nonce) =>
        requestIds(sql`
          SELECT request_id FROM x402_payments WHERE asset = ${asset} AND payer = ${payer} AND auth_nonce = ${nonce}`).pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]?.request_id))
        ),
      claim,
      release: (requestId) =>
        sql`DELETE FROM x402_payments WHERE request_id = ${requestId} AND state = 'claimed' RETURNING request_id`.pipe(
          Effect.map((rows) => rows.length > 0)
        ),
      releaseAbandoned: (requestId) =>
        requestIds(sql`
          DELETE FROM x402_payments p WHERE p.state = 'claimed'
            ${Option.match(requestId, { onNone: () => sql``, onSome: (id) => sql`AND p.request_id = ${id}` })}
            AND EXISTS (SELECT 1 FROM analysis_requests a WHERE a.request_id = p.request_id AND a.status = 'failed')
          RETURNING p.request_id`).pipe(Effect.map((rows) => rows.map((r) => r.request_id))),
      markSubmitted: (requestId, s) =>
        Effect.gen(function* () {
          const at = yield* now
          const rows = yield* paymentRows(sql`
            UPDATE x402_payments SET state = 'submitted', settled_by = ${s.by},
              tx_hash = ${Option.getOrNull(s.txHash)},
              raw_transaction = ${Option.getOrNull(s.rawTransaction)},
              attempts = attempts + 1, updated_at = ${at}
            WHERE request_id = ${requestId} AND state = 'claimed'
            RETURNING ${cols}`)
          return Option.fromNullable(rows[0]).pipe(Option.map(toRecord))
        }),
      recordTransaction: (requestId, tx) =>
        Effect.gen(function* () {
          const at = yield* now
          yield* sql`
            UPDATE x402_payments SET tx_hash = ${tx.txHash},
              raw_transaction = COALESCE(${Option.getOrNull(tx.rawTransaction)}, raw_transaction),
              updated_at = ${at}
            WHERE request_id = ${requestId} AND state = 'submitted'`
        }),
      markSettled: (requestId, txHash, paymentResponse) =>
        Effect.gen(function* () {
          const at = yield* now
          // The signed transfer is no longer needed once the payment is final: keep only its digest and hash.
          const rows = yield* paymentRows(sql`
            UPDATE x402_payments SET state = 'settled', tx_hash = ${txHash}, payment_response = ${paymentResponse},
              raw_transaction = NULL, payment_payload = NULL, updated_at = ${at}
            WHERE request_id = ${requestId} AND state IN ('claimed', 'submitted')
            RETURNING ${cols}`)
          if (rows[0]) return toRecord(rows[0])
          return yield* get(requestId).pipe(Effect.flatMap((r) => (Option.isSome(r) ? Effect.succeed(r.value) : one([], "settling"))))
        }),
      markFailed: (requestId, reason) =>
        Effect.gen(function* () {
          const at = yield* now
          const rows = yield* paymentRows(sql`
            UPDATE x402_payments SET state = 'failed', failure_reason = ${reason},
              raw_transaction = NULL, payment_payload = NULL, updated_at = ${at}
            WHERE request_id = ${requestId} AND state IN ('claimed', 'submitted')
            RETURNING ${cols}`)
          if (rows[0]) return toRecord(rows[0])
          return yield* get(requestId).pipe(Effect.flatMap((r) => (Option.isSome(r) ? Effect.succeed(r.value) : one([], "failing"))))
        }),
      countAttempt: (requestId) =>
        Effect.gen(function* () {
          const at = yield* now
          yield* sql`UPDATE x402_payments SET attempts = attempts + 1, updated_at = ${at} WHERE request_id = ${requestId}`
        }),
      touch: (requestId) =>
        Effect.flatMap(now, (at) => Effect.asVoid(sql`UPDATE x402_payments SET updated_at = ${at} WHERE request_id = ${requestId}`)),
      takeDue: (before, until) =>
        Effect.gen(function* () {
          const at = yield* now
          // One statement, no transaction held: SKIP LOCKED passes over a row another instance is taking right now,
          // and the lease keeps it away from them afterwards (also across the RPC calls that follow).
          const rows = yield* paymentRows(sql`
            UPDATE x402_payments SET reconciling_until = ${until}
            WHERE request_id = (
              SELECT p.request_id FROM x402_payments p
              WHERE p.updated_at <= ${before}
                AND (p.reconciling_until IS NULL OR p.reconciling_until < ${at})
                AND (p.state = 'submitted' OR p.request_id IN (
                  SELECT a.request_id FROM analysis_requests a WHERE a.status = 'payment_pending'))
              ORDER BY p.updated_at LIMIT 1
              FOR UPDATE OF p SKIP LOCKED)
            AND (reconciling_until IS NULL OR reconciling_until < ${at})
            RETURNING ${cols}`)
          return Option.fromNullable(rows[0]).pipe(Option.map(toRecord))
        }),
      endLease: (requestId) => Effect.asVoid(sql`UPDATE x402_payments SET reconciling_until = NULL WHERE request_id = ${requestId}`)
    }
  })
)
