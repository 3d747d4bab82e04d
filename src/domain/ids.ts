/** Identifiers that must not be mixed up with one another: each is a string with a brand of its own. */
import { Option, Schema } from "effect"

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

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * An order id as the card processor echoes it back (client_reference_id, metadata), in its canonical lower case:
 * orders created before ids were canonicalised carry the client's letter case there. None for anything else.
 */
export const echoedOrderId = (echoed: string | null | undefined): Option.Option<OrderId> =>
  echoed !== null && echoed !== undefined && UUID_TEXT.test(echoed) ? Option.some(OrderId.make(echoed.toLowerCase())) : Option.none()

/** Whether the processor's echo names `orderId` (stored in lower case), in whatever letter case it was sent. */
export const echoesOrder = (echoed: string | null | undefined, orderId: OrderId): boolean =>
  Option.exists(echoedOrderId(echoed), (id) => id === orderId.toLowerCase())
