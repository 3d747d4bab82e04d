/**
 * Fulfilment: the one function that grants an order's pack from a verified paid session (the webhook,
 * checkout-status and POST /v1/credits/confirm all go through it), and the processor's word on a pending order.
 */
import { Clock, Effect, Option } from "effect"
import { AppConfig } from "../config.ts"
import { echoedOrderId, echoesOrder, type KeyFingerprint } from "../domain/ids.ts"
import { paymentsUnavailable } from "./failures.ts"
import { sameFingerprint } from "./keys.ts"
import { Ledger } from "./Ledger.ts"
import type { OrderRepository, OrderRow } from "./orders.ts"
import { type CardProcessor, Processor, type ProcessorSession } from "./Processor.ts"
import { PACK_AMOUNT_CENTS, PACK_CURRENCY } from "./sessionParams.ts"

/** SPEC §3.2 / §8: an order without a session becomes not_issued only after 48 h and a complete, empty listing. */
export const NOT_ISSUED_AFTER_MS = 48 * 3600 * 1000
export const LISTING_MAX_PAGES = 5
/** Slack around the order's attempt times when listing sessions (clock skew between us and the processor). */
const LISTING_SLACK_SECONDS = 600

/** What one fulfilment attempt found; only `granted` changed the ledger. */
export type FulfilOutcome =
  | "granted"
  | "already_granted"
  | "not_paid"
  | "unknown_order"
  | "not_owner"
  | "mismatch"

export const seconds = (ms: number) => Math.floor(ms / 1000)

export const makeFulfilment = (orders: OrderRepository) =>
  Effect.gen(function* () {
    const ledger = yield* Ledger
    const processor = yield* Processor
    const config = yield* AppConfig

    const sessionPrefix = config.testMode ? "cs_test_" : "cs_live_"

    const gateway: Effect.Effect<CardProcessor, ReturnType<typeof paymentsUnavailable>> = processor.enabled
      ? Effect.succeed(processor)
      : Effect.fail(paymentsUnavailable(config))

    /** Why a session cannot grant the pack of `order`, or None when it is a verified paid checkout of it. */
    const verifyPaid = (session: ProcessorSession, order: OrderRow): Option.Option<Exclude<FulfilOutcome, "granted" | "already_granted">> => {
      if (session.paymentStatus !== "paid") return Option.some("not_paid")
      const matches =
        session.id.startsWith(sessionPrefix) &&
        session.mode === "payment" &&
        session.amountTotal === PACK_AMOUNT_CENTS &&
        session.currency === PACK_CURRENCY &&
        echoesOrder(session.clientReferenceId, order.order_id) &&
        echoesOrder(session.metadata["order_id"], order.order_id) &&
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
        yield* orders.linkSession(order.order_id, session)
        const granted = yield* ledger.grant(order.order_id, order.fingerprint)
        if (granted) yield* Effect.logInfo("order paid; credits granted", { order_id: order.order_id, session_id: session.id })
        return granted ? ("granted" as const) : ("already_granted" as const)
      })

    /**
     * The one fulfilment function: retrieves the session from the processor (never trusting a caller's copy),
     * finds its order, checks ownership when a key asks, and grants once.
     */
    const fulfilSession = (sessionId: string, owner: Option.Option<KeyFingerprint>) =>
      Effect.gen(function* () {
        const gw = yield* gateway
        const session = yield* gw.retrieveSession(sessionId)
        const orderId = echoedOrderId(session.clientReferenceId ?? session.metadata["order_id"])
        if (Option.isNone(orderId)) return "unknown_order" as const
        const order = yield* orders.find(orderId.value)
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
            (s) => echoesOrder(s.clientReferenceId, order.order_id) || echoesOrder(s.metadata["order_id"], order.order_id)
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
            const state = yield* orders.currentState(order.order_id)
            return { state: state === "reversed" ? "reversed" : "paid", checkoutUrl: Option.none<string>() } as const
          }
          return { state: "unresolved", checkoutUrl: Option.none<string>() } as const
        }
        const failedAsync =
          session.status === "complete" &&
          (session.paymentIntentStatus === "canceled" || session.paymentIntentStatus === "requires_payment_method")
        if (session.status === "expired" || failedAsync) {
          yield* orders.markPendingAs(order.order_id, "expired")
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
          yield* orders.linkSession(order.order_id, listing.session)
          return yield* evaluate(gw, order, listing.session.id)
        }
        const nowMs = yield* Clock.currentTimeMillis
        if (listing.complete && nowMs - order.last_attempt_at.getTime() >= NOT_ISSUED_AFTER_MS) {
          yield* orders.markPendingAs(order.order_id, "not_issued")
          return { state: "not_issued", checkoutUrl: Option.none<string>() } as const
        }
        return { state: "unresolved", checkoutUrl: Option.none<string>() } as const
      })

    const viewOf = (order: OrderRow) =>
      Effect.gen(function* () {
        if (order.state !== "pending") return { state: order.state, checkoutUrl: Option.none<string>() }
        return yield* resolvePending(yield* gateway, order)
      })

    return { gateway, fulfilSession, resolvePending, viewOf }
  })
