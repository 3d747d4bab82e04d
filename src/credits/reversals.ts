/** Refunds and disputes of a paid order: finds the order a report of the processor names and reverses or restores it. */
import { Effect, Option } from "effect"
import { echoedOrderId } from "../domain/ids.ts"
import { Ledger, type ReversalCause } from "./Ledger.ts"
import type { OrderRepository, OrderRow } from "./orders.ts"
import { Processor } from "./Processor.ts"

/** A refund or dispute report of one payment, as a webhook delivers it. */
export interface ReversalReport {
  readonly paymentIntentId: string | null
  readonly metadata: Readonly<Record<string, string>>
  readonly causes: ReadonlyArray<ReversalCause>
  readonly eventId: string
}

export const makeReversals = (orders: OrderRepository) =>
  Effect.gen(function* () {
    const ledger = yield* Ledger
    const processor = yield* Processor

    /**
     * Refunds or disputes of one payment: finds the order through metadata or the payment intent, records each
     * cause, and reverses or restores the order accordingly (see Ledger.applyCause).
     */
    const applyReversalCauses = (input: ReversalReport) =>
      Effect.gen(function* () {
        let order = Option.none<OrderRow>()
        const metaOrder = echoedOrderId(input.metadata["order_id"])
        if (Option.isSome(metaOrder)) order = yield* orders.find(metaOrder.value)
        if (Option.isNone(order) && input.paymentIntentId !== null) {
          order = yield* orders.findByPaymentIntent(input.paymentIntentId)
          if (Option.isNone(order)) {
            const piMeta = yield* processor.paymentIntentMetadata(input.paymentIntentId)
            const piOrder = echoedOrderId(piMeta["order_id"])
            if (Option.isSome(piOrder)) order = yield* orders.find(piOrder.value)
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
        if (input.paymentIntentId !== null) yield* orders.recordPaymentIntent(orderId, input.paymentIntentId)
        let outcome: "reversed" | "restored" | "unchanged" = "unchanged"
        for (const cause of input.causes) {
          const changed = yield* ledger.applyCause(orderId, fingerprint, cause)
          if (changed === "reversed") yield* Effect.logWarning("order reversed; key paused", { order_id: orderId, cause: cause.id, status: cause.status })
          if (changed === "restored") yield* Effect.logInfo("reversal undone; order paid again", { order_id: orderId, cause: cause.id, status: cause.status })
          if (changed !== "unchanged") outcome = changed
        }
        return outcome
      })

    return { applyReversalCauses }
  })
