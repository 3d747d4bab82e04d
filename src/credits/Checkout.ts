/**
 * Checkout orders: hosted checkout creation, order states of SPEC §3.2, and the one fulfilment function that
 * the webhook, checkout-status and POST /v1/credits/confirm all go through.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { AppConfig } from "../config.ts"
import type { Conflict, NotFound, ServiceUnavailable } from "../domain/errors.ts"
import type { OrderState } from "../domain/schemas.ts"
import {
  orderConflict,
  orderNotFound,
  orStorageUnavailable,
  paymentsUnavailable,
  paymentUnconfirmed,
  processorFailure
} from "./failures.ts"
import { sameFingerprint } from "./keys.ts"
import { isUniqueViolation, Ledger, type ReversalCause } from "./Ledger.ts"
import { type CardProcessor, Processor, type ProcessorError, type ProcessorSession } from "./Processor.ts"
import { buildSessionParams, PACK_AMOUNT_CENTS, PACK_CURRENCY, SessionParams } from "./sessionParams.ts"

/** Stripe refuses `expires_at` less than 30 minutes ahead; past this margin a lost create is not retried. */
const CREATE_RETRY_MARGIN_SECONDS = 35 * 60
/** SPEC §3.2 / §8: an order without a session becomes not_issued only after 48 h and a complete, empty listing. */
export const NOT_ISSUED_AFTER_MS = 48 * 3600 * 1000
export const LISTING_MAX_PAGES = 5
/** Slack around the order's attempt times when listing sessions (clock skew between us and the processor). */
const LISTING_SLACK_SECONDS = 600

export const OrderContextFields = Schema.Struct({
  channel: Schema.optional(Schema.String),
  discovery: Schema.optional(Schema.String),
  use_case: Schema.optional(Schema.String)
})
export type OrderContext = typeof OrderContextFields.Type

/** The Stripe idempotency key of an order's session create: the same on every retry of that order. */
export const idempotencyKeyOf = (orderId: string) => `morsel-checkout-${orderId}`

type StoredState = "pending" | "paid" | "expired" | "not_issued" | "reversed"

interface OrderRow {
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

export interface OrderView {
  readonly orderId: string
  readonly state: OrderState
  readonly checkoutUrl: Option.Option<string>
}

export type CheckoutResult =
  | { readonly _tag: "Session"; readonly orderId: string; readonly sessionId: string; readonly checkoutUrl: string }
  | { readonly _tag: "Completed"; readonly orderId: string; readonly state: "paid" | "reversed" }

/** What one fulfilment attempt found; only `granted` changed the ledger. */
export type FulfilOutcome =
  | "granted"
  | "already_granted"
  | "not_paid"
  | "unknown_order"
  | "not_owner"
  | "mismatch"

/** A refund or dispute report of one payment, as a webhook delivers it. */
export interface ReversalReport {
  readonly paymentIntentId: string | null
  readonly metadata: Readonly<Record<string, string>>
  readonly causes: ReadonlyArray<ReversalCause>
  readonly eventId: string
}

export class Checkout extends Context.Tag("morsel/credits/Checkout")<
  Checkout,
  {
    /** POST /v1/credits/checkout: a new order, a retry of one (same session), or a completed order's state. */
    readonly checkout: (
      fingerprint: string,
      orderId: string,
      context: Option.Option<OrderContext>
    ) => Effect.Effect<CheckoutResult, Conflict | ServiceUnavailable>
    /** POST /v1/credits/checkout-status: never creates or expires a checkout. */
    readonly status: (fingerprint: string, orderId: string) => Effect.Effect<OrderView, NotFound | ServiceUnavailable>
    /** POST /v1/credits/confirm: only a verified paid session of this key's order grants. */
    readonly confirm: (fingerprint: string, sessionId: string) => Effect.Effect<"granted" | "already_granted", Conflict | ServiceUnavailable>
    /** Retrieves the session from the processor, finds its order, checks ownership when a key asks, and grants once. */
    readonly fulfilSession: (
      sessionId: string,
      owner: Option.Option<string>
    ) => Effect.Effect<FulfilOutcome, ServiceUnavailable | ProcessorError | SqlError.SqlError>
    /** Records refunds or disputes of one payment and reverses or restores its order accordingly. */
    readonly applyReversalCauses: (
      report: ReversalReport
    ) => Effect.Effect<"reversed" | "restored" | "unchanged" | "unknown_order", ProcessorError | SqlError.SqlError>
    /** Marks a pending order expired when its session expired or its delayed payment failed; false for no order. */
    readonly sessionEnded: (sessionId: string, orderId: string | null) => Effect.Effect<boolean, SqlError.SqlError>
    /** Remembers the session of an order (a completed checkout still awaiting its delayed payment). */
    readonly rememberSession: (orderId: string, sessionId: string) => Effect.Effect<void, SqlError.SqlError>
  }
>() {}

const seconds = (ms: number) => Math.floor(ms / 1000)

export const CheckoutLive = Layer.effect(
  Checkout,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const processor = yield* Processor
    const config = yield* AppConfig

    const sessionPrefix = config.testMode ? "cs_test_" : "cs_live_"

    const gateway: Effect.Effect<CardProcessor, ReturnType<typeof paymentsUnavailable>> = processor.enabled
      ? Effect.succeed(processor)
      : Effect.fail(paymentsUnavailable())

    const findOrder = (orderId: string) =>
      sql<OrderRow>`SELECT * FROM credit_orders WHERE order_id = ${orderId}`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))

    const findPendingOrder = (fingerprint: string) =>
      sql<OrderRow>`SELECT * FROM credit_orders WHERE fingerprint = ${fingerprint} AND state = 'pending'`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    const findOrderByPaymentIntent = (paymentIntentId: string) =>
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
      findOrder(orderId).pipe(Effect.map(Option.match({ onNone: () => "pending" as StoredState, onSome: (o) => o.state })))

    /** Why a session cannot grant the pack of `order`, or None when it is a verified paid checkout of it. */
    const verifyPaid = (session: ProcessorSession, order: OrderRow): Option.Option<Exclude<FulfilOutcome, "granted" | "already_granted">> => {
      if (session.paymentStatus !== "paid") return Option.some("not_paid")
      const matches =
        session.id.startsWith(sessionPrefix) &&
        session.mode === "payment" &&
        session.amountTotal === PACK_AMOUNT_CENTS &&
        session.currency === PACK_CURRENCY &&
        session.clientReferenceId === order.order_id &&
        session.metadata["order_id"] === order.order_id &&
        sameFingerprint(session.metadata["key_fingerprint"] ?? "", order.fingerprint)
      return matches ? Option.none() : Option.some("mismatch")
    }

    /** Grants the order's pack when `session` is its verified paid checkout; idempotent. */
    const fulfilWith = (session: ProcessorSession, order: OrderRow) =>
      Effect.gen(function* () {
        const refused = verifyPaid(session, order)
        if (Option.isSome(refused)) {
          if (refused.value === "mismatch") {
            yield* Effect.logError("paid session does not match its order; no credits granted", {
              order_id: order.order_id,
              session_id: session.id,
              amount_total: session.amountTotal,
              currency: session.currency
            })
          }
          return refused.value
        }
        yield* linkSession(order.order_id, session)
        const granted = yield* ledger.grant(order.order_id, order.fingerprint)
        if (granted) yield* Effect.logInfo("order paid; credits granted", { order_id: order.order_id, session_id: session.id })
        return granted ? ("granted" as const) : ("already_granted" as const)
      })

    /**
     * The one fulfilment function: retrieves the session from the processor (never trusting a caller's copy),
     * finds its order, checks ownership when a key asks, and grants once.
     */
    const fulfilSession = (sessionId: string, owner: Option.Option<string>) =>
      Effect.gen(function* () {
        const gw = yield* gateway
        const session = yield* gw.retrieveSession(sessionId)
        const orderId = session.clientReferenceId ?? session.metadata["order_id"]
        if (orderId === undefined || !Schema.is(Schema.UUID)(orderId)) return "unknown_order" as const
        const order = yield* findOrder(orderId)
        if (Option.isNone(order)) return "unknown_order" as const
        if (Option.isSome(owner) && !sameFingerprint(owner.value, order.value.fingerprint)) return "not_owner" as const
        return yield* fulfilWith(session, order.value)
      })

    /** Sessions of an order over its possible creation interval, bounded at five pages of 100. */
    const findSessionByListing = (gw: CardProcessor, order: OrderRow) =>
      Effect.gen(function* () {
        const gte = seconds(order.created_at.getTime()) - LISTING_SLACK_SECONDS
        const lte = seconds(order.last_attempt_at.getTime()) + LISTING_SLACK_SECONDS
        let startingAfter = Option.none<string>()
        for (let page = 0; page < LISTING_MAX_PAGES; page++) {
          const result = yield* gw.listSessions({ gte, lte, startingAfter })
          const found = result.sessions.find(
            (s) => s.clientReferenceId === order.order_id || s.metadata["order_id"] === order.order_id
          )
          if (found !== undefined) return { _tag: "Found" as const, session: found }
          const last = result.sessions[result.sessions.length - 1]
          if (!result.hasMore || last === undefined) return { _tag: "Absent" as const, complete: !result.hasMore }
          startingAfter = Option.some(last.id)
        }
        return { _tag: "Absent" as const, complete: false }
      })

    /** The state of a pending order whose session is known, from the processor's own record of it. */
    const evaluate = (gw: CardProcessor, order: OrderRow, sessionId: string) =>
      Effect.gen(function* () {
        const session = yield* gw.retrieveSession(sessionId)
        if (session.paymentStatus === "paid") {
          const outcome = yield* fulfilWith(session, order)
          if (outcome === "granted" || outcome === "already_granted") {
            const state = yield* currentState(order.order_id)
            return { state: state === "reversed" ? "reversed" : "paid", checkoutUrl: Option.none<string>() } as const
          }
          return { state: "unresolved", checkoutUrl: Option.none<string>() } as const
        }
        const failedAsync =
          session.status === "complete" &&
          (session.paymentIntentStatus === "canceled" || session.paymentIntentStatus === "requires_payment_method")
        if (session.status === "expired" || failedAsync) {
          yield* markPendingAs(order.order_id, "expired")
          return { state: "expired", checkoutUrl: Option.none<string>() } as const
        }
        return { state: "open", checkoutUrl: Option.fromNullable(session.url) } as const
      })

    /** SPEC §3.2 for a pending order: read the processor; without a saved session, list and apply the 48 h rule. */
    const resolvePending = (gw: CardProcessor, order: OrderRow) =>
      Effect.gen(function* () {
        if (order.session_id !== null) return yield* evaluate(gw, order, order.session_id)
        const listing = yield* findSessionByListing(gw, order)
        if (listing._tag === "Found") {
          yield* linkSession(order.order_id, listing.session)
          return yield* evaluate(gw, order, listing.session.id)
        }
        const nowMs = yield* Clock.currentTimeMillis
        if (listing.complete && nowMs - order.last_attempt_at.getTime() >= NOT_ISSUED_AFTER_MS) {
          yield* markPendingAs(order.order_id, "not_issued")
          return { state: "not_issued", checkoutUrl: Option.none<string>() } as const
        }
        return { state: "unresolved", checkoutUrl: Option.none<string>() } as const
      })

    const viewOf = (order: OrderRow) =>
      Effect.gen(function* () {
        if (order.state !== "pending") return { state: order.state, checkoutUrl: Option.none<string>() }
        return yield* resolvePending(yield* gateway, order)
      })

    const createFor = (gw: CardProcessor, order: OrderRow) =>
      Effect.gen(function* () {
        const params = yield* paramsOf(order)
        const at = new Date(yield* Clock.currentTimeMillis)
        // Widen the listing interval before the call: a create that reaches the processor after a crash is found.
        yield* sql`UPDATE credit_orders SET last_attempt_at = ${at}, updated_at = ${at} WHERE order_id = ${order.order_id}`
        const session = yield* gw.createSession(params, idempotencyKeyOf(order.order_id))
        yield* linkSession(order.order_id, session)
        if (session.url === null) return yield* Effect.fail(paymentUnconfirmed("The processor returned no checkout URL; retry the same order."))
        return { _tag: "Session", orderId: order.order_id, sessionId: session.id, checkoutUrl: session.url } as const
      })

    const continueOrder = (gw: CardProcessor, order: OrderRow) =>
      Effect.gen(function* () {
        switch (order.state) {
          case "paid":
          case "reversed":
            return { _tag: "Completed", orderId: order.order_id, state: order.state } as const
          case "expired":
          case "not_issued":
            return yield* Effect.fail(
              orderConflict(`Order ${order.order_id} ended (${order.state}) without payment; start a new order with a new order_id.`)
            )
        }
        if (order.session_id === null) {
          const params = yield* paramsOf(order)
          const nowSeconds = seconds(yield* Clock.currentTimeMillis)
          if (nowSeconds < params.expires_at - CREATE_RETRY_MARGIN_SECONDS) return yield* createFor(gw, order)
        }
        const resolved = yield* resolvePending(gw, order)
        switch (resolved.state) {
          case "paid":
          case "reversed":
            return { _tag: "Completed", orderId: order.order_id, state: resolved.state } as const
          case "open": {
            // Re-read: the session may have been linked just now by the listing.
            const current = yield* findOrder(order.order_id)
            const sessionId = Option.flatMap(current, (o) => Option.fromNullable(o.session_id))
            const url = Option.orElse(resolved.checkoutUrl, () => Option.flatMap(current, (o) => Option.fromNullable(o.checkout_url)))
            if (Option.isNone(sessionId) || Option.isNone(url)) {
              return yield* Effect.fail(paymentUnconfirmed("The order's checkout could not be read back; retry the same order."))
            }
            return { _tag: "Session", orderId: order.order_id, sessionId: sessionId.value, checkoutUrl: url.value } as const
          }
          case "unresolved":
            return yield* Effect.fail(
              paymentUnconfirmed(`Order ${order.order_id} is unresolved; retry it later or read its checkout-status. Do not replace it.`)
            )
          default:
            return yield* Effect.fail(
              orderConflict(`Order ${order.order_id} ended (${resolved.state}) without payment; start a new order with a new order_id.`)
            )
        }
      })

    const storeContext = (orderId: string, context: Option.Option<OrderContext>) =>
      Option.match(context, {
        onNone: () => Effect.void,
        onSome: (c) =>
          sql`UPDATE credit_orders SET context = ${JSON.stringify(c)}::jsonb WHERE order_id = ${orderId} AND context IS NULL`.pipe(Effect.asVoid)
      })

    const insertOrder = (fingerprint: string, orderId: string, context: Option.Option<OrderContext>) =>
      Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const at = new Date(nowMs)
        const params = buildSessionParams({ orderId, fingerprint, publicBaseUrl: config.publicBaseUrl, nowSeconds: seconds(nowMs) })
        const contextJson = Option.match(context, { onNone: () => null, onSome: (c) => JSON.stringify(c) })
        return yield* Effect.gen(function* () {
          yield* ledger.openAccount(fingerprint)
          return yield* sql<OrderRow>`
            INSERT INTO credit_orders (order_id, fingerprint, state, session_params, context, created_at, last_attempt_at, updated_at)
            VALUES (${orderId}, ${fingerprint}, 'pending', ${JSON.stringify(params)}::jsonb, ${contextJson}::jsonb, ${at}, ${at}, ${at})
            ON CONFLICT (order_id) DO NOTHING
            RETURNING *`
        }).pipe(sql.withTransaction, Effect.map((rows) => Option.fromNullable(rows[0])))
      })

    /** POST /v1/credits/checkout: a new order, a retry of one (same session), or a completed order's state. */
    const checkout = (fingerprint: string, orderId: string, context: Option.Option<OrderContext>) =>
      Effect.gen(function* () {
        const gw = yield* gateway
        const existing = yield* findOrder(orderId)
        if (Option.isSome(existing)) {
          if (!sameFingerprint(existing.value.fingerprint, fingerprint)) {
            return yield* Effect.fail(orderConflict("This order_id is already used; choose a new UUID v4 for a new order."))
          }
          yield* storeContext(orderId, context)
          return yield* continueOrder(gw, existing.value)
        }
        const account = yield* ledger.account(fingerprint)
        if (Option.isSome(account) && account.value.blocked) {
          return yield* Effect.fail(orderConflict("This key is paused pending support review; no new orders until it is reviewed."))
        }
        const pending = yield* findPendingOrder(fingerprint)
        if (Option.isSome(pending)) {
          const resolved = yield* resolvePending(gw, pending.value)
          if (resolved.state === "open" || resolved.state === "unresolved") {
            return yield* Effect.fail(
              orderConflict(
                `Order ${pending.value.order_id} is still ${resolved.state}; finish or retry it (same order_id) before starting a new one.`
              )
            )
          }
        }
        const inserted = yield* insertOrder(fingerprint, orderId, context).pipe(
          Effect.catchIf(isUniqueViolation, () =>
            Effect.fail(orderConflict("Another order of this key is still pending; retry that order_id instead."))
          )
        )
        const order = Option.isSome(inserted) ? Option.some(inserted.value) : yield* findOrder(orderId)
        if (Option.isNone(order)) return yield* Effect.fail(orderConflict("The order could not be stored; retry the same order_id."))
        if (!sameFingerprint(order.value.fingerprint, fingerprint)) {
          return yield* Effect.fail(orderConflict("This order_id is already used; choose a new UUID v4 for a new order."))
        }
        return yield* Option.isSome(inserted) ? createFor(gw, order.value) : continueOrder(gw, order.value)
      }).pipe(Effect.catchTag("ProcessorError", processorFailure), orStorageUnavailable)

    /** POST /v1/credits/checkout-status: never creates or expires a checkout. */
    const status = (fingerprint: string, orderId: string) =>
      Effect.gen(function* () {
        const order = yield* findOrder(orderId)
        if (Option.isNone(order) || !sameFingerprint(order.value.fingerprint, fingerprint)) return yield* Effect.fail(orderNotFound())
        const view = yield* viewOf(order.value)
        return { orderId, state: view.state, checkoutUrl: view.checkoutUrl } satisfies OrderView
      }).pipe(Effect.catchTag("ProcessorError", processorFailure), orStorageUnavailable)

    /** POST /v1/credits/confirm: only a verified paid session of this key's order grants. */
    const confirm = (fingerprint: string, sessionId: string) =>
      Effect.gen(function* () {
        const outcome = yield* fulfilSession(sessionId, Option.some(fingerprint)).pipe(
          Effect.catchTag("ProcessorError", (e) =>
            e.kind === "not_found" ? Effect.succeed("unknown_order" as const) : processorFailure(e)
          )
        )
        switch (outcome) {
          case "granted":
          case "already_granted":
            return outcome
          case "not_paid":
            return yield* Effect.fail(paymentUnconfirmed("This checkout is not paid yet; confirm again after paying."))
          default:
            return yield* Effect.fail(paymentUnconfirmed("No paid checkout of this key has that session_id."))
        }
      }).pipe(orStorageUnavailable)

    /**
     * Refunds or disputes of one payment: finds the order through metadata or the payment intent, records each
     * cause, and reverses or restores the order accordingly (see Ledger.applyCause).
     */
    const applyReversalCauses = (input: ReversalReport) =>
      Effect.gen(function* () {
        let order = Option.none<OrderRow>()
        const metaOrder = input.metadata["order_id"]
        if (metaOrder !== undefined && Schema.is(Schema.UUID)(metaOrder)) order = yield* findOrder(metaOrder)
        if (Option.isNone(order) && input.paymentIntentId !== null) {
          order = yield* findOrderByPaymentIntent(input.paymentIntentId)
          if (Option.isNone(order)) {
            const piMeta = yield* processor.paymentIntentMetadata(input.paymentIntentId)
            const piOrder = piMeta["order_id"]
            if (piOrder !== undefined && Schema.is(Schema.UUID)(piOrder)) order = yield* findOrder(piOrder)
          }
        }
        if (Option.isNone(order)) {
          yield* Effect.logWarning("refund or dispute for an unknown order acknowledged", {
            event_id: input.eventId,
            payment_intent: input.paymentIntentId
          })
          return "unknown_order" as const
        }
        const { order_id: orderId, fingerprint } = order.value
        if (input.paymentIntentId !== null) {
          yield* sql`
            UPDATE credit_orders SET payment_intent_id = COALESCE(payment_intent_id, ${input.paymentIntentId})
            WHERE order_id = ${orderId}`
        }
        let outcome: "reversed" | "restored" | "unchanged" = "unchanged"
        for (const cause of input.causes) {
          const changed = yield* ledger.applyCause(orderId, fingerprint, cause)
          if (changed === "reversed") yield* Effect.logWarning("order reversed; key paused", { order_id: orderId, cause: cause.id, status: cause.status })
          if (changed === "restored") yield* Effect.logInfo("reversal undone; order paid again", { order_id: orderId, cause: cause.id, status: cause.status })
          if (changed !== "unchanged") outcome = changed
        }
        return outcome
      })

    /** Marks a pending order expired when its session expired or its delayed payment failed. */
    const sessionEnded = (sessionId: string, orderId: string | null) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ order_id: string }>`
          SELECT order_id FROM credit_orders WHERE session_id = ${sessionId} OR order_id::text = ${orderId ?? ""}`
        for (const row of rows) yield* markPendingAs(row.order_id, "expired")
        return rows.length > 0
      })

    return Checkout.of({
      checkout,
      status,
      confirm,
      fulfilSession,
      applyReversalCauses,
      sessionEnded,
      rememberSession: (orderId, sessionId) =>
        Schema.is(Schema.UUID)(orderId)
          ? sql`UPDATE credit_orders SET session_id = COALESCE(session_id, ${sessionId}) WHERE order_id = ${orderId}`.pipe(Effect.asVoid)
          : Effect.void
    })
  })
)
