/** The checkout service: hosted checkout creation and retries of an order, its status, and confirmation by its key. */
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { AppConfig } from "../config.ts"
import type { Conflict, NotFound, ServiceUnavailable } from "../domain/errors.ts"
import { echoedOrderId, type KeyFingerprint, type OrderId } from "../domain/ids.ts"
import type { OrderState } from "../domain/schemas.ts"
import { orderConflict, orderNotFound, orStorageUnavailable, paymentUnconfirmed, processorFailure, supportSentence } from "./failures.ts"
import { type FulfilOutcome, makeFulfilment, seconds } from "./fulfilment.ts"
import { sameFingerprint } from "./keys.ts"
import { isUniqueViolation, Ledger } from "./Ledger.ts"
import { makeOrderRepository, type OrderContext, type OrderRow } from "./orders.ts"
import type { CardProcessor, ProcessorError } from "./Processor.ts"
import { makeReversals, type ReversalReport } from "./reversals.ts"
import { buildSessionParams } from "./sessionParams.ts"

/** Stripe refuses `expires_at` less than 30 minutes ahead; past this margin a lost create is not retried. */
const CREATE_RETRY_MARGIN_SECONDS = 35 * 60

/** The Stripe idempotency key of an order's session create: the same on every retry of that order. */
export const idempotencyKeyOf = (orderId: OrderId) => `morsel-checkout-${orderId}`

export interface OrderView {
  readonly orderId: OrderId
  readonly state: OrderState
  readonly checkoutUrl: Option.Option<string>
}

export type CheckoutResult =
  | { readonly _tag: "Session"; readonly orderId: OrderId; readonly sessionId: string; readonly checkoutUrl: string }
  | { readonly _tag: "Completed"; readonly orderId: OrderId; readonly state: "paid" | "reversed" }

export class Checkout extends Context.Tag("morsel/credits/Checkout")<
  Checkout,
  {
    /** POST /v1/credits/checkout: a new order, a retry of one (same session), or a completed order's state. */
    readonly checkout: (
      fingerprint: KeyFingerprint,
      orderId: OrderId,
      context: Option.Option<OrderContext>
    ) => Effect.Effect<CheckoutResult, Conflict | ServiceUnavailable>
    /** POST /v1/credits/checkout-status: never creates or expires a checkout. */
    readonly status: (fingerprint: KeyFingerprint, orderId: OrderId) => Effect.Effect<OrderView, NotFound | ServiceUnavailable>
    /** POST /v1/credits/confirm: only a verified paid session of this key's order grants. */
    readonly confirm: (fingerprint: KeyFingerprint, sessionId: string) => Effect.Effect<"granted" | "already_granted", Conflict | ServiceUnavailable>
    /** Retrieves the session from the processor, finds its order, checks ownership when a key asks, and grants once. */
    readonly fulfilSession: (
      sessionId: string,
      owner: Option.Option<KeyFingerprint>
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

export const CheckoutLive = Layer.effect(
  Checkout,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const config = yield* AppConfig
    const orders = yield* makeOrderRepository
    const { gateway, fulfilSession, resolvePending, viewOf } = yield* makeFulfilment(orders)
    const { applyReversalCauses } = yield* makeReversals(orders)

    const createFor = (gw: CardProcessor, order: OrderRow) =>
      Effect.gen(function* () {
        const params = yield* orders.paramsOf(order)
        const at = new Date(yield* Clock.currentTimeMillis)
        // Widen the listing interval before the call: a create that reaches the processor after a crash is found.
        yield* orders.touchAttempt(order.order_id, at)
        const session = yield* gw.createSession(params, idempotencyKeyOf(order.order_id))
        yield* orders.linkSession(order.order_id, session)
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
          const params = yield* orders.paramsOf(order)
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
            const current = yield* orders.find(order.order_id)
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

    const insertOrder = (fingerprint: KeyFingerprint, orderId: OrderId, context: Option.Option<OrderContext>) =>
      Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const at = new Date(nowMs)
        const params = buildSessionParams({ orderId, fingerprint, publicBaseUrl: config.publicBaseUrl, nowSeconds: seconds(nowMs) })
        return yield* Effect.gen(function* () {
          yield* ledger.openAccount(fingerprint)
          return yield* orders.insert({ orderId, fingerprint, params, context, at })
        }).pipe(sql.withTransaction)
      })

    /** POST /v1/credits/checkout: a new order, a retry of one (same session), or a completed order's state. */
    const checkout = (fingerprint: KeyFingerprint, orderId: OrderId, context: Option.Option<OrderContext>) =>
      Effect.gen(function* () {
        const gw = yield* gateway
        const existing = yield* orders.find(orderId)
        if (Option.isSome(existing)) {
          if (!sameFingerprint(existing.value.fingerprint, fingerprint)) {
            return yield* Effect.fail(orderConflict("This order_id is already used; choose a new UUID v4 for a new order."))
          }
          yield* orders.storeContext(orderId, context)
          return yield* continueOrder(gw, existing.value)
        }
        const account = yield* ledger.account(fingerprint)
        if (Option.isSome(account) && account.value.blocked) {
          return yield* Effect.fail(orderConflict(`This key is paused pending support review; no new orders until it is reviewed.${supportSentence(config)}`))
        }
        const pending = yield* orders.findPending(fingerprint)
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
        const order = Option.isSome(inserted) ? Option.some(inserted.value) : yield* orders.find(orderId)
        if (Option.isNone(order)) return yield* Effect.fail(orderConflict("The order could not be stored; retry the same order_id."))
        if (!sameFingerprint(order.value.fingerprint, fingerprint)) {
          return yield* Effect.fail(orderConflict("This order_id is already used; choose a new UUID v4 for a new order."))
        }
        return yield* Option.isSome(inserted) ? createFor(gw, order.value) : continueOrder(gw, order.value)
      }).pipe(Effect.catchTag("ProcessorError", processorFailure), orStorageUnavailable)

    /** POST /v1/credits/checkout-status: never creates or expires a checkout. */
    const status = (fingerprint: KeyFingerprint, orderId: OrderId) =>
      Effect.gen(function* () {
        const order = yield* orders.find(orderId)
        if (Option.isNone(order) || !sameFingerprint(order.value.fingerprint, fingerprint)) return yield* Effect.fail(orderNotFound())
        const view = yield* viewOf(order.value)
        return { orderId, state: view.state, checkoutUrl: view.checkoutUrl } satisfies OrderView
      }).pipe(Effect.catchTag("ProcessorError", processorFailure), orStorageUnavailable)

    /** POST /v1/credits/confirm: only a verified paid session of this key's order grants. */
    const confirm = (fingerprint: KeyFingerprint, sessionId: string) =>
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

    /** Marks a pending order expired when its session expired or its delayed payment failed. */
    const sessionEnded = (sessionId: string, orderId: string | null) =>
      Effect.gen(function* () {
        const ids = yield* orders.idsOfSession(sessionId, echoedOrderId(orderId))
        for (const id of ids) yield* orders.markPendingAs(id, "expired")
        return ids.length > 0
      })

    return Checkout.of({
      checkout,
      status,
      confirm,
      fulfilSession,
      applyReversalCauses,
      sessionEnded,
      rememberSession: (orderId, sessionId) =>
        Option.match(echoedOrderId(orderId), { onNone: () => Effect.void, onSome: (id) => orders.rememberSession(id, sessionId) })
    })
  })
)
