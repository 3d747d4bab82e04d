/** The `analyze_food` tool: its schemas (derived from the REST wire schemas), its description and its results. */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import { decodePaymentResponseHeader } from "@x402/core/http"
import { declareDiscoveryExtension } from "@x402/extensions/bazaar"
import { Either, Option, ParseResult, Schema } from "effect"
import type { AnalyzeError, Served } from "../analysis/AnalyzeRequests.ts"
import { type InvalidRequest, schemaRejection } from "../domain/errors.ts"
import {
  AnalysisResult,
  AnalyzeRequest,
  analyzeRequestExample,
  IdempotencyKey,
  jsonSchemaOf,
  Uuid,
  X402PaymentRequired,
  X402SettleResponse
} from "../domain/schemas.ts"
import { MAX_JSON_DEPTH, tooDeep, valueNestsDeeperThan } from "../http/transport.ts"
import { type DecodedPayment, decodePaymentPayload, discoveryOutput, resourceInfo, retarget } from "../x402/protocol.ts"

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

/** Every failed call: the REST error body without its `_tag`, plus the Retry-After hint of 429 and 503. */
export const ToolError = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String.annotations({ description: "The same error.code the REST API answers" }),
    message: Schema.String,
    request_id: Schema.optional(Uuid),
    issues: Schema.optional(
      Schema.Array(Schema.Struct({ path: Schema.Array(Schema.Union(Schema.String, Schema.Number)), message: Schema.String }))
    )
  }),
  payment_response: Schema.optional(X402SettleResponse.annotations({ description: "payment_pending only: the pending x402 settlement receipt (also in _meta)" })),
  retry_after_seconds: Schema.optional(
    Schema.Int.annotations({ description: "429 and 503 errors: wait at least this long before retrying (REST's Retry-After)" })
  )
}).annotations({ identifier: "ToolError" })

/**
 * The tool's structuredContent is one of three objects (a pending payment is an error with its receipt). The official TypeScript client (1.32) validates
 * structuredContent against the output schema even on error results (typescript-sdk #1943), so the schema
 * names the error shapes too; otherwise the client would throw instead of showing the error.
 */
const ToolOutput = Schema.Union(AnalysisResult, ToolError, X402PaymentRequired)

/** The input schema is inlined (no "$ref"), since several model providers do not follow references in tool parameters. */
const inputSchema = jsonSchemaOf(ToolInput, { inline: true })
const outputSchema = jsonSchemaOf(ToolOutput, { inline: false })

const exampleInput = { ...analyzeRequestExample, idempotency_key: "meal-2026-11-21-lunch" }

/** Discovery metadata of the tool (x402 Bazaar extension, MCP form), built by the official package. */
const mcpDiscovery = declareDiscoveryExtension({
  toolName: TOOL_NAME,
  description: "Estimate calories, protein, carbohydrate and fat from one food photo",
  transport: "streamable-http",
  inputSchema,
  example: exampleInput,
  output: discoveryOutput
}).bazaar

/** The price challenge of the tool: the REST challenge's terms for the MCP endpoint and the tool's discovery metadata. */
export const toolChallenge = (mcpUrl: string) => {
  const resource = resourceInfo(
    mcpUrl,
    `MCP tool ${TOOL_NAME}: nutrition estimate (calories, protein, carbohydrate, fat) of one food photo; paid only when the analysis succeeds`
  )
  return (challenge: X402PaymentRequired) => retarget(challenge, resource, mcpDiscovery)
}

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

/** The x402 payment of a call: the PaymentPayload object in its metadata, decoded as REST decodes PAYMENT-SIGNATURE. */
export const paymentOf = (meta: Readonly<Record<string, unknown>> | undefined): Option.Option<Either.Either<DecodedPayment, string>> =>
  meta !== undefined && Object.hasOwn(meta, PAYMENT_META_KEY) && meta[PAYMENT_META_KEY] !== undefined
    ? Option.some(decodePaymentPayload(meta[PAYMENT_META_KEY]))
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

/** A success: the analysis result as structuredContent and as JSON text; an x402 receipt in `_meta`. */
export const successResult = (served: Served): CallToolResult => {
  const result: AnalysisResult = served.result
  return {
    content: [text(result)],
    structuredContent: { ...result },
    ...receiptMeta(Option.map(served.paymentResponse, decodeReceipt))
  }
}

/** An error as a tool result with the REST error code; a price challenge as the x402 MCP transport's PaymentRequired. */
export const errorResult = (failure: AnalyzeError, forTool: (challenge: X402PaymentRequired) => X402PaymentRequired): CallToolResult => {
  if (failure._tag === "PaymentRequired" && failure.payment_required !== undefined) {
    // x402 clients read the challenge from structuredContent (or the first text); the morsel code follows as a second text.
    const challenge = forTool(failure.payment_required)
    return { isError: true, content: [text(challenge), text({ error: failure.error })], structuredContent: challenge }
  }
  const pending = failure._tag === "ServiceUnavailable" ? Option.fromNullable(failure.payment_response) : Option.none()
  const retryAfter =
    failure._tag === "TooManyRequests" || failure._tag === "ServiceUnavailable" ? Option.fromNullable(failure.retryAfterSeconds) : Option.none()
  const body = {
    error: failure.error,
    ...Option.match(pending, { onNone: () => ({}), onSome: (receipt) => ({ payment_response: receipt }) }),
    ...Option.match(retryAfter, { onNone: () => ({}), onSome: (seconds) => ({ retry_after_seconds: seconds }) })
  }
  return { isError: true, content: [text(body)], structuredContent: body, ...receiptMeta(pending) }
}
