/** The order repository: the rows of credit_orders (the order states of SPEC §3.2) and every read and write of them. */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option, Schema } from "effect"
import { rowsOf } from "../db/rows.ts"
import { KeyFingerprint, OrderId } from "../domain/ids.ts"
import type { ProcessorSession } from "./Processor.ts"
import { SessionParams } from "./sessionParams.ts"

export const OrderContextFields = Schema.Struct({
  channel: Schema.optional(Schema.String),
  discovery: Schema.optional(Schema.String),
  use_case: Schema.optional(Schema.String)
})
export type OrderContext = typeof OrderContextFields.Type

export const StoredState = Schema.Literal("pending", "paid", "expired", "not_issued", "reversed")
export type StoredState = typeof StoredState.Type

/** The columns of credit_orders the service reads; `session_params` is decoded when a create needs it. */
export const OrderRow = Schema.Struct({
  order_id: OrderId,
  fingerprint: KeyFingerprint,
  state: StoredState,
  session_id: Schema.NullOr(Schema.String),
  checkout_url: Schema.NullOr(Schema.String),
  payment_intent_id: Schema.NullOr(Schema.String),
  session_params: Schema.Unknown,
  created_at: Schema.DateFromSelf,
  last_attempt_at: Schema.DateFromSelf
})
export type OrderRow = typeof OrderRow.Type
const orderRows = rowsOf(OrderRow)
const orderIds = rowsOf(Schema.Struct({ order_id: OrderId }))
/** The order a query found, if any. */
const firstOrder = Effect.map((rows: ReadonlyArray<OrderRow>) => Option.fromNullable(rows[0]))

/** A new order as first stored: pending, with the session parameters every retry of its create sends. */
export interface NewOrder {
  readonly orderId: OrderId
  readonly fingerprint: KeyFingerprint
  readonly params: SessionParams
  readonly context: Option.Option<OrderContext>
  readonly at: Date
}

export const makeOrderRepository = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const find = (orderId: OrderId) => orderRows(sql`SELECT * FROM credit_orders WHERE order_id = ${orderId}`).pipe(firstOrder)

  const findPending = (fingerprint: KeyFingerprint) =>
    orderRows(sql`SELECT * FROM credit_orders WHERE fingerprint = ${fingerprint} AND state = 'pending'`).pipe(firstOrder)

  const findByPaymentIntent = (paymentIntentId: string) =>
    orderRows(sql`SELECT * FROM credit_orders WHERE payment_intent_id = ${paymentIntentId}`).pipe(firstOrder)

  const paramsOf = (order: OrderRow) => Schema.decodeUnknown(SessionParams)(order.session_params).pipe(Effect.orDie)

  const linkSession = (orderId: OrderId, session: ProcessorSession) =>
    Effect.gen(function* () {
      const at = new Date(yield* Clock.currentTimeMillis)
      yield* sql`
        UPDATE credit_orders
        SET session_id = COALESCE(session_id, ${session.id}),
            checkout_url = COALESCE(checkout_url, ${session.url}),
            payment_intent_id = COALESCE(payment_intent_id, ${session.paymentIntentId}),
            updated_at = ${at}
        WHERE order_id = ${orderId}`
    })

  const markPendingAs = (orderId: OrderId, state: "expired" | "not_issued") =>
    Effect.gen(function* () {
      const at = new Date(yield* Clock.currentTimeMillis)
      yield* sql`UPDATE credit_orders SET state = ${state}, updated_at = ${at} WHERE order_id = ${orderId} AND state = 'pending'`
    })

  const currentState = (orderId: OrderId) =>
    find(orderId).pipe(Effect.map(Option.match({ onNone: () => "pending" as StoredState, onSome: (o) => o.state })))

  /** Widens the order's listing interval to `at`: a create that reaches the processor after a crash is still found. */
  const touchAttempt = (orderId: OrderId, at: Date) =>
    sql`UPDATE credit_orders SET last_attempt_at = ${at}, updated_at = ${at} WHERE order_id = ${orderId}`

  /** Stores a new pending order unless its order_id exists; None when it did. Call inside the order's transaction. */
  const insert = ({ orderId, fingerprint, params, context, at }: NewOrder) => {
    const paramsJson = JSON.stringify(params)
    const contextJson = Option.match(context, { onNone: () => null, onSome: (c) => JSON.stringify(c) })
    return orderRows(sql`
      INSERT INTO credit_orders (order_id, fingerprint, state, session_params, context, created_at, last_attempt_at, updated_at)
      VALUES (${orderId}, ${fingerprint}, 'pending', ${paramsJson}::jsonb, ${contextJson}::jsonb, ${at}, ${at}, ${at})
      ON CONFLICT (order_id) DO NOTHING
      RETURNING *`).pipe(firstOrder)
  }

  const storeContext = (orderId: OrderId, context: Option.Option<OrderContext>) =>
    Option.match(context, {
      onNone: () => Effect.void,
      onSome: (c) =>
        sql`UPDATE credit_orders SET context = ${JSON.stringify(c)}::jsonb WHERE order_id = ${orderId} AND context IS NULL`.pipe(Effect.asVoid)
    })

  const recordPaymentIntent = (orderId: OrderId, paymentIntentId: string) =>
    sql`
      UPDATE credit_orders SET payment_intent_id = COALESCE(payment_intent_id, ${paymentIntentId})
      WHERE order_id = ${orderId}`

  /** The orders a session names: by its saved session_id, or by the order_id it carries (canonical case). */
  const idsOfSession = (sessionId: string, orderId: Option.Option<OrderId>) =>
    orderIds(sql`SELECT order_id FROM credit_orders WHERE session_id = ${sessionId} OR order_id::text = ${Option.getOrElse(orderId, () => "")}`).pipe(
      Effect.map((rows) => rows.map((row) => row.order_id))
    )

  const rememberSession = (orderId: OrderId, sessionId: string) =>
    sql`UPDATE credit_orders SET session_id = COALESCE(session_id, ${sessionId}) WHERE order_id = ${orderId}`.pipe(Effect.asVoid)

  return {
    find,
    findPending,
    findByPaymentIntent,
    paramsOf,
    linkSession,
    markPendingAs,
    currentState,
    touchAttempt,
    insert,
    storeContext,
    recordPaymentIntent,
    idsOfSession,
    rememberSession
  }
})

export type OrderRepository = Effect.Effect.Success<typeof makeOrderRepository>
