/** The public errors the credits feature answers with, built in one place so codes and messages stay consistent. */
import { Effect } from "effect"
import { Conflict, NotFound, ServiceUnavailable, TooManyRequests, Unauthorized } from "../domain/errors.ts"

export { orStorageUnavailable, orStorageUnavailableFor, storageUnavailable } from "../db/storage.ts"
import type { ProcessorError } from "./Processor.ts"

export const invalidKey = () =>
  new Unauthorized({
    error: { code: "invalid_key", message: "Unknown API key, or a key of the other mode. A key becomes known at its first checkout." }
  })

export const paymentsUnavailable = () =>
  new ServiceUnavailable({
    error: { code: "payments_unavailable", message: "card payments are not configured on this server (its operator sets STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET); pay per call with x402 instead" }
  })

export const processorUnavailable = () =>
  new ServiceUnavailable({
    error: { code: "processor_unavailable", message: "The card processor is unavailable; retry the same order or session." }
  })

export const orderConflict = (message: string) => new Conflict({ error: { code: "order_conflict", message } })

export const paymentUnconfirmed = (message: string) => new Conflict({ error: { code: "payment_unconfirmed", message } })

export const orderNotFound = () =>
  new NotFound({ error: { code: "order_not_found", message: "No order with this order_id belongs to this key." } })

export const feedbackLimited = (message: string) => new TooManyRequests({ error: { code: "feedback_limited", message } })

/** Processor failures other than the ones a caller handles become 503 processor_unavailable (payments_unavailable without one). */
export const processorFailure = (error: ProcessorError) =>
  error.kind === "disabled"
    ? Effect.fail(paymentsUnavailable())
    : Effect.logWarning("card processor call failed", { kind: error.kind, message: error.message }).pipe(
        Effect.zipRight(Effect.fail(processorUnavailable()))
      )
