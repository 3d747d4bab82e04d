/** The public errors the credits feature answers with, built in one place so codes and messages stay consistent. */
import { Effect, Option } from "effect"
import type { Settings } from "../config.ts"
import { Conflict, NotFound, ServiceUnavailable, TooManyRequests, Unauthorized } from "../domain/errors.ts"

export { orStorageUnavailable, orStorageUnavailableFor, storageUnavailable } from "../db/storage.ts"
import type { ProcessorError } from "./Processor.ts"

export const invalidKey = () =>
  new Unauthorized({
    error: { code: "invalid_key", message: "Unknown API key, or a key of the other mode. A key becomes known at its first checkout." }
  })

/** No card processor here: point to x402 only when it is on, and say plainly when nothing can be paid at all. */
export const paymentsUnavailable = (settings?: Settings) =>
  new ServiceUnavailable({
    error: {
      code: "payments_unavailable",
      message:
        settings === undefined
          ? "Card credits are not sold on this server (its operator has not set STRIPE_SECRET_KEY)."
          : Option.isSome(settings.x402.payTo)
            ? "Card credits are not sold on this server (its operator has not set STRIPE_SECRET_KEY); pay per call with x402 instead."
            : "This server takes no payments yet: its operator has set neither STRIPE_SECRET_KEY (card credits) nor X402_PAY_TO (per-call x402 payments), so no analysis can be paid for."
    }
  })

/** One sentence naming who to contact, when the operator published a support contact. */
export const supportSentence = (settings: Settings) =>
  Option.match(settings.operator.supportContact, {
    onNone: () => "",
    onSome: (contact) =>
      ` Contact ${Option.match(settings.operator.name, { onNone: () => "support", onSome: (name) => `${name} support` })} at ${contact}.`
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
