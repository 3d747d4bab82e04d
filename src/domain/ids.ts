/** Identifiers that must not be mixed up with one another: each is a string with a brand of its own. */
import { Schema } from "effect"

/** An analysis request, as in `request_id`. */
export const RequestId = Schema.String.pipe(Schema.brand("RequestId"))
export type RequestId = typeof RequestId.Type

/** A checkout order, as in `order_id` (chosen by the client). */
export const OrderId = Schema.String.pipe(Schema.brand("OrderId"))
export type OrderId = typeof OrderId.Type

/** Who pays: `key:<key fingerprint>` or `wallet:<lowercase address>`; never a secret. */
export const PayerId = Schema.String.pipe(Schema.brand("PayerId"))
export type PayerId = typeof PayerId.Type

/** The keyed fingerprint under which a credit key is stored; the key itself never is. */
export const KeyFingerprint = Schema.String.pipe(Schema.brand("KeyFingerprint"))
export type KeyFingerprint = typeof KeyFingerprint.Type

/** What makes two analysis requests the same input (image, MIME type, language, supplied total). */
export const InputFingerprint = Schema.String.pipe(Schema.brand("InputFingerprint"))
export type InputFingerprint = typeof InputFingerprint.Type
