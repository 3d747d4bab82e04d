/** Error classes: one class per documented status, each body carrying `error.code`. */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { X402PaymentRequired, X402SettleResponse } from "./schemas.ts"

const detail = <const Codes extends ReadonlyArray<string>>(...codes: Codes) =>
  Schema.Struct({
    code: Schema.Literal(...codes),
    message: Schema.String,
    request_id: Schema.optional(Schema.UUID)
  })

export const InvalidRequestCodes = [
  "invalid_request",
  "invalid_base64",
  "unsupported_image",
  "mime_mismatch",
  "corrupt_image",
  "image_dimensions",
  "wrong_mode"
] as const

/** The longest message an error body carries: messages may quote the input, and the input can be megabytes. */
export const MAX_ERROR_MESSAGE_CHARS = 300
/** The most schema issues an error body lists. */
export const MAX_ERROR_ISSUES = 10

const MAX_PATH_KEY_CHARS = 40

const cap = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`)

/** A message cut to MAX_ERROR_MESSAGE_CHARS, marked with an ellipsis when cut. */
export const capMessage = (message: string): string => cap(message, MAX_ERROR_MESSAGE_CHARS)

export interface SchemaIssue {
  readonly path: ReadonlyArray<string | number>
  readonly message: string
}

export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()(
  "InvalidRequest",
  {
    error: Schema.extend(
      detail(...InvalidRequestCodes),
      Schema.Struct({ issues: Schema.optional(Schema.Array(Schema.Struct({ path: Schema.Array(Schema.Union(Schema.String, Schema.Number)), message: Schema.String }))) })
    )
  },
  HttpApiSchema.annotations({ status: 400, description: "Invalid input; nothing consumed" })
) {}

const saysAbsent = (issue: SchemaIssue) => issue.message.startsWith("Expected undefined, actual ")
const pathKey = (path: ReadonlyArray<string | number>) => path.join("\0")

/**
 * The issues without an optional field's second reading ("or absent") where another issue says what that field (or a
 * part of it) must be. Linear in the issues: a tool's arguments decoded with every error can give tens of thousands.
 */
const withoutAbsentAlternatives = (issues: ReadonlyArray<SchemaIssue>) => {
  const told = new Set<string>()
  for (const issue of issues) {
    if (!saysAbsent(issue)) for (let end = 0; end <= issue.path.length; end++) told.add(pathKey(issue.path.slice(0, end)))
  }
  return issues.filter((issue) => !(saysAbsent(issue) && told.has(pathKey(issue.path))))
}

/** The 400 for input a schema refused (REST body or tool arguments): the first issue in the message, all capped. */
export const schemaRejection = (issues: ReadonlyArray<SchemaIssue>, fallback: string): InvalidRequest => {
  const telling = withoutAbsentAlternatives(issues)
  const kept = telling.slice(0, MAX_ERROR_ISSUES).map((issue) => ({
    // A path names the caller's keys, which can be as long as any value.
    path: issue.path.slice(0, MAX_ERROR_ISSUES).map((key) => (typeof key === "string" ? cap(key, MAX_PATH_KEY_CHARS) : key)),
    message: capMessage(issue.message)
  }))
  const first = kept[0]
  const where = first && first.path.length > 0 ? `${first.path.join(".")}: ` : ""
  return new InvalidRequest({
    error: { code: "invalid_request", message: first ? capMessage(`${where}${first.message}`) : capMessage(fallback), issues: kept }
  })
}

export class PaymentRequired extends Schema.TaggedError<PaymentRequired>()(
  "PaymentRequired",
  {
    error: detail("payment_required", "invalid_payment", "insufficient_credits", "key_paused", "x402_unavailable"),
    payment_required: Schema.optional(X402PaymentRequired),
    payment_response: Schema.optional(X402SettleResponse.annotations({ description: "A settlement that failed for good: its receipt (nothing moved)" }))
  },
  HttpApiSchema.annotations({ status: 402, description: "x402 price challenge (header PAYMENT-REQUIRED) or an unusable payment or credit key" })
) {}

export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { error: detail("invalid_key") },
  HttpApiSchema.annotations({ status: 401, description: "Unknown, malformed or other-mode API key" })
) {}

export class Forbidden extends Schema.TaggedError<Forbidden>()(
  "Forbidden",
  { error: detail("untrusted_origin") },
  HttpApiSchema.annotations({ status: 403, description: "Request from an untrusted browser Origin" })
) {}

export class NotFound extends Schema.TaggedError<NotFound>()(
  "NotFound",
  { error: detail("not_found", "order_not_found", "request_not_found", "food_not_found") },
  HttpApiSchema.annotations({ status: 404, description: "Nothing owned by this key matches" })
) {}

export class Conflict extends Schema.TaggedError<Conflict>()(
  "Conflict",
  { error: detail("in_progress", "idempotency_conflict", "order_conflict", "payment_unconfirmed", "feedback_conflict", "authorization_reused") },
  HttpApiSchema.annotations({ status: 409, description: "in_progress (retry unchanged), idempotency_conflict (recover the original request) or an order/feedback conflict" })
) {}

export class Gone extends Schema.TaggedError<Gone>()(
  "Gone",
  { error: detail("result_expired") },
  HttpApiSchema.annotations({ status: 410, description: "The 24-hour result recovery window has passed" })
) {}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()(
  "PayloadTooLarge",
  { error: detail("image_too_large", "request_too_large") },
  HttpApiSchema.annotations({ status: 413, description: "Image or request too large" })
) {}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  { error: detail("unsupported_media_type") },
  HttpApiSchema.annotations({ status: 415, description: "Content type must be application/json" })
) {}

export class NoFoodDetected extends Schema.TaggedError<NoFoodDetected>()(
  "NoFoodDetected",
  { error: detail("no_food_detected") },
  HttpApiSchema.annotations({ status: 422, description: "No food detected; nothing consumed" })
) {}

export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()(
  "TooManyRequests",
  { error: detail("rate_limited", "failure_limit", "spend_limited", "feedback_limited", "capacity_limited") },
  HttpApiSchema.annotations({ status: 429, description: "A limit was hit; header Retry-After in seconds; nothing consumed" })
) {
  /** The wait this refusal asks for (Retry-After; MCP's retry_after_seconds): an hour for the payer's own daily limits, a minute for any other. */
  get retryAfterSeconds(): number {
    return this.error.code === "failure_limit" || this.error.code === "spend_limited" ? 3600 : 60
  }
}

export class AnalysisFailed extends Schema.TaggedError<AnalysisFailed>()(
  "AnalysisFailed",
  { error: detail("analysis_failed") },
  HttpApiSchema.annotations({ status: 502, description: "Analysis failed; nothing consumed, a reserved credit is returned" })
) {}

export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()(
  "ServiceUnavailable",
  {
    error: detail("payment_pending", "model_unavailable", "payments_unavailable", "storage_unavailable", "processor_unavailable", "starting"),
    payment_response: Schema.optional(X402SettleResponse.annotations({ description: "payment_pending only: the pending settlement receipt" }))
  },
  HttpApiSchema.annotations({ status: 503, description: "Read error.code; payment_pending: retry the same request and authorization after 60 s" })
) {
  /** The wait this answer asks for (Retry-After; MCP's retry_after_seconds), if retrying can help at all. */
  get retryAfterSeconds(): number | undefined {
    return unavailableRetryAfterSeconds[this.error.code]
  }
}

/**
 * Whole seconds to wait by 503 code: a minute for a settlement on its way, a few seconds for a passing outage,
 * none for a part the operator has not configured (retrying does not help until a setting changes).
 */
const unavailableRetryAfterSeconds: Record<ServiceUnavailable["error"]["code"], number | undefined> = {
  payment_pending: 60,
  model_unavailable: undefined,
  payments_unavailable: undefined,
  storage_unavailable: 5,
  processor_unavailable: 5,
  starting: 5
}

export class AnalysisTimeout extends Schema.TaggedError<AnalysisTimeout>()(
  "AnalysisTimeout",
  { error: detail("analysis_timeout") },
  HttpApiSchema.annotations({ status: 504, description: "Analysis timed out; nothing consumed" })
) {}

export type ApiError =
  | InvalidRequest
  | PaymentRequired
  | Unauthorized
  | Forbidden
  | NotFound
  | Conflict
  | Gone
  | PayloadTooLarge
  | UnsupportedMediaType
  | NoFoodDetected
  | TooManyRequests
  | AnalysisFailed
  | ServiceUnavailable
  | AnalysisTimeout
