/** The order repository: the rows of credit_orders (the order states of SPEC §3.2) and every read and write of them. */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option, Schema } from "effect"
import type { ProcessorSession } from "./Processor.ts"
import { SessionParams } from "./sessionParams.ts"

export const OrderContextFields = Schema.Struct({
  channel: Schema.optional(Schema.String),
  discovery: Schema.optional(Schema.String),
  use_case: Schema.optional(Schema.String)
})
export type OrderContext = typeof OrderContextFields.Type

export type StoredState = "pending" | "paid" | "expired" | "not_issued" | "reversed"

export interface OrderRow {
  readonly order_id: string
  readonly fingerprint: string
  readonly state: StoredState
  readonly session_id: string | null
  readonly checkout_url: string | null
  readonly payment_intent_id: string | null
  readonly session_params: unknown
  readonly created_at: Date
  readonly last_attempt_at: Date
}

/** A new order as first stored: pending, with the session parameters every retry of its create sends. */
export interface NewOrder {
  readonly orderId: string
  readonly fingerprint: string
  readonly params: SessionParams
  readonly context: Option.Option<OrderContext>
  readonly at: Date
}

export const makeOrderRepository = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const find = (orderId: string) =>
    sql<OrderRow>`SELECT * FROM credit_orders WHERE order_id = ${orderId}`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))

  const findPending = (fingerprint: string) =>
    sql<OrderRow>`SELECT * FROM credit_orders WHERE fingerprint = ${fingerprint} AND state = 'pending'`.pipe(
      Effect.map((rows) => Option.fromNullable(rows[0]))
    )

  const findByPaymentIntent = (paymentIntentId: string) =>
    sql<OrderRow>`SELECT * FROM credit_orders WHERE payment_intent_id = ${paymentIntentId}`.pipe(
      Effect.map((rows) => Option.fromNullable(rows[0]))
    )

  const paramsOf = (order: OrderRow) => Schema.decodeUnknown(SessionParams)(order.session_params).pipe(Effect.orDie)

  const linkSession = (orderId: string, session: ProcessorSession) =>
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

  const markPendingAs = (orderId: string, state: "expired" | "not_issued") =>
    Effect.gen(function* () {
      const at = new Date(yield* Clock.currentTimeMillis)
      yield* sql`UPDATE credit_orders SET state = ${state}, updated_at = ${at} WHERE order_id = ${orderId} AND state = 'pending'`
    })

  const currentState = (orderId: string) =>
    find(orderId).pipe(Effect.map(Option.match({ onNone: () => "pending" as StoredState, onSome: (o) => o.state })))

  /** Widens the order's listing interval to `at`: a create that reaches the processor after a crash is still found. */
  const touchAttempt = (orderId: string, at: Date) =>
    sql`UPDATE credit_orders SET last_attempt_at = ${at}, updated_at = ${at} WHERE order_id = ${orderId}`

  /** Stores a new pending order unless its order_id exists; None when it did. Call inside the order's transaction. */
  const insert = (order: NewOrder) => {
    const contextJson = Option.match(order.context, { onNone: () => null, onSome: (c) => JSON.stringify(c) })
    return sql<OrderRow>`
      INSERT INTO credit_orders (order_id, fingerprint, state, session_params, context, created_at, last_attempt_at, updated_at)
      VALUES (${order.orderId}, ${order.fingerprint}, 'pending', ${JSON.stringify(order.params)}::jsonb, ${contextJson}::jsonb, ${order.at}, ${order.at}, ${order.at})
      ON CONFLICT (order_id) DO NOTHING
      RETURNING *`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))
  }

  const storeContext = (orderId: string, context: Option.Option<OrderContext>) =>
    Option.match(context, {
      onNone: () => Effect.void,
      onSome: (c) =>
        sql`UPDATE credit_orders SET context = ${JSON.stringify(c)}::jsonb WHERE order_id = ${orderId} AND context IS NULL`.pipe(Effect.asVoid)
    })

  const recordPaymentIntent = (orderId: string, paymentIntentId: string) =>
    sql`
      UPDATE credit_orders SET payment_intent_id = COALESCE(payment_intent_id, ${paymentIntentId})
      WHERE order_id = ${orderId}`

  /** The orders a session names: by its saved session_id, or by the order_id it carries. */
  const idsOfSession = (sessionId: string, orderId: string | null) =>
    sql<{ order_id: string }>`
      SELECT order_id FROM credit_orders WHERE session_id = ${sessionId} OR order_id::text = ${orderId ?? ""}`.pipe(
      Effect.map((rows) => rows.map((row) => row.order_id))
    )

  const rememberSession = (orderId: string, sessionId: string) =>
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
