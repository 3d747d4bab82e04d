/** The `analyze_food` tool: its schemas (derived from the REST wire schemas), its description and its results. */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import { decodePaymentResponseHeader } from "@x402/core/http"
import { Either, JSONSchema, Option, ParseResult, Schema } from "effect"
import type { AnalyzeError, Served } from "../analysis/http.ts"
import { type InvalidRequest, schemaRejection } from "../domain/errors.ts"
import { MAX_JSON_DEPTH, tooDeep, valueNestsDeeperThan } from "../http/transport.ts"
import { AnalysisResult, AnalyzeRequest, IdempotencyKey, Uuid } from "../domain/schemas.ts"
import { retryAfterSeconds } from "../http/headers.ts"

export const TOOL_NAME = "analyze_food"

/** x402 v2 MCP transport: where a payment arrives and where its receipt goes. */
export const PAYMENT_META_KEY = "x402/payment"
export const PAYMENT_RESPONSE_META_KEY = "x402/payment-response"

/** The REST body plus the Idempotency-Key header as one more argument; unknown arguments are rejected as on REST. */
export const ToolInput = Schema.Struct({
  ...AnalyzeRequest.fields,
  idempotency_key: IdempotencyKey
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type ToolInput = typeof ToolInput.Type

/** A JSON object left to x402. Not Schema.Object/Unknown: their JSON schemas repeat one "$id", which the SDK's validator (ajv) rejects. */
const JsonObject = (description: string) =>
  Schema.declare((u: unknown): u is object => typeof u === "object" && u !== null, { jsonSchema: { type: "object", description } })

/** Every failed call: the REST error body without its `_tag`, plus the Retry-After hint of 429 and 503. */
export const ToolError = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String.annotations({ description: "The same error.code the REST API answers (SPEC §7)" }),
    message: Schema.String,
    request_id: Schema.optional(Uuid),
    issues: Schema.optional(
      Schema.Array(Schema.Struct({ path: Schema.Array(Schema.Union(Schema.String, Schema.Number)), message: Schema.String }))
    )
  }),
  payment_response: Schema.optional(JsonObject("payment_pending only: the pending x402 settlement receipt (also in _meta)")),
  retry_after_seconds: Schema.optional(
    Schema.Int.annotations({ description: "429 and 503 errors: wait at least this long before retrying (REST's Retry-After)" })
  )
}).annotations({ identifier: "ToolError" })

/** The x402 v2 PaymentRequired object (the price challenge), as the x402 MCP transport returns it. */
export const PaymentChallenge = Schema.Struct({
  x402Version: Schema.Literal(2),
  error: Schema.optional(Schema.String),
  resource: Schema.optional(JsonObject("The resource being paid for")),
  accepts: Schema.Array(JsonObject("Payment terms: scheme, network, amount, asset, payTo, maxTimeoutSeconds, extra")),
  extensions: Schema.optional(JsonObject("x402 extensions"))
}).annotations({ identifier: "PaymentRequired" })

/**
 * The tool's structuredContent is one of three objects. The official TypeScript client (1.32) validates
 * structuredContent against the output schema even on error results (typescript-sdk #1943), so the schema
 * names the error shapes too; otherwise the client would throw instead of showing the error.
 */
const ToolOutput = Schema.Union(AnalysisResult, ToolError, PaymentChallenge)

/**
 * JSON schemas without "$schema": MCP's default dialect is JSON Schema 2020-12, which reads these keywords alike.
 * The input schema is inlined (no "$ref"), since several model providers do not follow references in tool parameters.
 */
const jsonSchemaOf = (schema: Schema.Schema.AnyNoContext, inline: boolean) => {
  const { $defs = {}, $schema: _dialect, ...root } = JSONSchema.make(schema)
  if (!inline) return { ...root, $defs }
  const fields = (node: object): Record<string, unknown> =>
    Object.fromEntries(Object.entries(node).map(([key, value]) => [key, resolve(value)]))
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve)
    if (typeof node !== "object" || node === null) return node
    const ref = "$ref" in node && typeof node.$ref === "string" ? node.$ref.replace(/^#\/\$defs\//, "") : undefined
    return ref !== undefined && ref in $defs ? resolve($defs[ref]) : fields(node)
  }
  return fields(root)
}

const inputSchema = jsonSchemaOf(ToolInput, true)
const outputSchema = jsonSchemaOf(ToolOutput, false)

export const toolDefinition = (publicBaseUrl: string): Tool => ({
  name: TOOL_NAME,
  title: "Analyze a food photo",
  description: [
    "Estimate calories, protein, carbohydrate and fat from one JPEG or PNG photo of food (max 2 MB, 16–2048 px per side).",
    "Returns the dish name, its food components with estimated edible grams, nutrition per component and for the whole meal.",
    "Every value is an estimate: model_confidence is the model's own uncalibrated rating; results are not medical or allergen advice.",
    "Pass known_total_grams only when all edible food in the photo was weighed.",
    "Price per successful analysis: one prepaid credit (Authorization: Bearer <API key> configured on the connection),",
    `or 0.01 USDC over x402 (PaymentPayload object in params._meta["${PAYMENT_META_KEY}"]; the receipt comes back in`,
    `result._meta["${PAYMENT_RESPONSE_META_KEY}"]). Without either, the result is an error carrying the x402 PaymentRequired challenge (when this server accepts x402).`,
    "Failed analyses cost nothing. Reuse the same idempotency_key to retry or to recover a result for 24 hours; use a new key for a new photo.",
    "Errors have isError true and structuredContent { error: { code, message, request_id? } } with the REST API's error codes.",
    `Feedback on a result is not a tool: POST ${publicBaseUrl}/v1/credits/feedback with the request_id (credit keys only).`
  ].join(" "),
  inputSchema: { ...inputSchema, type: "object" },
  outputSchema: { ...outputSchema, type: "object" },
  annotations: {
    title: "Analyze a food photo",
    readOnlyHint: false,
    destructiveHint: false,
    // The same idempotency_key and input give the same result and are charged once.
    idempotentHint: true,
    openWorldHint: true
  }
})

const pathOf = (path: ReadonlyArray<PropertyKey>) => path.map((key) => (typeof key === "number" ? key : String(key)))

/** Decodes the arguments with the REST schemas; a rejection carries the same code and message shape as REST's 400. */
export const decodeInput = (args: unknown): Either.Either<ToolInput, InvalidRequest> => {
  if (valueNestsDeeperThan(args, MAX_JSON_DEPTH)) return Either.left(tooDeep("the arguments are"))
  return Either.mapLeft(Schema.decodeUnknownEither(ToolInput, { errors: "all" })(args ?? {}), (error) =>
    schemaRejection(
      ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({ path: pathOf(issue.path), message: issue.message })),
      "invalid arguments"
    )
  )
}

/** The PAYMENT-SIGNATURE header value of REST: standard base64 of the PaymentPayload's JSON. */
export const paymentSignatureOf = (meta: Readonly<Record<string, unknown>> | undefined): Option.Option<string> =>
  meta !== undefined && Object.hasOwn(meta, PAYMENT_META_KEY) && meta[PAYMENT_META_KEY] !== undefined
    ? Option.some(Buffer.from(JSON.stringify(meta[PAYMENT_META_KEY]), "utf8").toString("base64"))
    : Option.none()

const text = (value: unknown) => ({ type: "text" as const, text: JSON.stringify(value) })

const receiptMeta = (receipt: Option.Option<unknown>) =>
  Option.match(receipt, { onNone: () => ({}), onSome: (value) => ({ _meta: { [PAYMENT_RESPONSE_META_KEY]: value } }) })

const decodeReceipt = (header: string): unknown => {
  try {
    return decodePaymentResponseHeader(header)
  } catch {
    return header
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A success: the SPEC §2.2 object as structuredContent and as JSON text; an x402 receipt in `_meta`. */
export const successResult = (served: Served): CallToolResult => {
  const result: AnalysisResult = served.result
  return {
    content: [text(result)],
    structuredContent: { ...result },
    ...receiptMeta(Option.map(served.paymentResponse, decodeReceipt))
  }
}

/** An error as a tool result with the REST error code; a price challenge as the x402 MCP transport's PaymentRequired. */
export const errorResult = (failure: AnalyzeError): CallToolResult => {
  if (failure._tag === "PaymentRequired" && isRecord(failure.payment_required)) {
    // x402 clients read the challenge from structuredContent (or the first text); the morsel code follows as a second text.
    const challenge = failure.payment_required
    return { isError: true, content: [text(challenge), text({ error: failure.error })], structuredContent: challenge }
  }
  const pending = failure._tag === "ServiceUnavailable" ? Option.fromNullable(failure.payment_response) : Option.none()
  const retryAfter =
    failure._tag === "TooManyRequests" || failure._tag === "ServiceUnavailable" ? Option.some(retryAfterSeconds(failure)) : Option.none()
  const body = {
    error: failure.error,
    ...Option.match(pending, { onNone: () => ({}), onSome: (receipt) => ({ payment_response: receipt }) }),
    ...Option.match(retryAfter, { onNone: () => ({}), onSome: (seconds) => ({ retry_after_seconds: seconds }) })
  }
  return { isError: true, content: [text(body)], structuredContent: body, ...receiptMeta(pending) }
}
