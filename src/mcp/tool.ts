/** The `analyze_food` tool: its schemas (derived from the REST wire schemas), its description and its results. */
import { RESOURCE_URI_META_KEY } from "@modelcontextprotocol/ext-apps/server"
import type { CallToolResult, Icon, Tool } from "@modelcontextprotocol/server"
import { decodePaymentResponseHeader } from "@x402/core/http"
import { declareDiscoveryExtension } from "@x402/extensions/bazaar"
import { Either, Option, ParseResult, Predicate, Schema } from "effect"
import type { AnalyzeError, Served } from "../analysis/AnalyzeRequests.ts"
import { PaymentProof } from "../analysis/Funding.ts"
import { MAX_JSON_DEPTH, tooDeep, valueNestsDeeperThan } from "../domain/bodies.ts"
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
import { discoveryOutput, resourceInfo, retarget } from "../x402/protocol.ts"
import { APP_URI } from "./app.ts"
import { FILE_ARGUMENT, imageFileJsonSchema } from "./files/imageFile.ts"

/** OpenAI Apps SDK: the top-level inputs ChatGPT fills with a file reference `{ download_url, file_id }`. */
export const FILE_PARAMS_META_KEY = "openai/fileParams"

export const TOOL_NAME = "analyze_food"

/** A plate with a fork: inline in the protocol so hosts show it without fetching anything, and at /icon.svg for registries. */
export const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><circle cx="32" cy="32" r="30" fill="#2f7d4a"/><circle cx="32" cy="32" r="19" fill="#fff"/><circle cx="32" cy="32" r="13" fill="#f2c14e"/><path d="M16 10v14m-4-14v10a4 4 0 0 0 8 0V10" stroke="#fff" stroke-width="2.5" fill="none" stroke-linecap="round"/></svg>'

/** The server's and the tool's icon (MCP `icons`). */
export const ICONS: Array<Icon> = [
  { src: `data:image/svg+xml;base64,${Buffer.from(ICON_SVG).toString("base64")}`, mimeType: "image/svg+xml", sizes: ["any"] }
]

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

/**
 * What tools/list declares: the photo as image_base64 with mime_type, or as image_file, a file reference that hosts
 * with file parameters fill in (`_meta["openai/fileParams"]`); exactly one of the two, which the server checks
 * (no top-level anyOf: several model providers refuse it in tool parameters).
 */
const declaredInputSchema = (() => {
  const properties = { ...(inputSchema["properties"] as Record<string, unknown>), [FILE_ARGUMENT]: imageFileJsonSchema }
  const required = (inputSchema["required"] as ReadonlyArray<string>).filter((name) => name !== "image_base64" && name !== "mime_type")
  return { ...inputSchema, properties, required }
})()
const outputSchema = jsonSchemaOf(ToolOutput, { inline: false })

const exampleInput = { ...analyzeRequestExample, idempotency_key: "meal-2026-11-21-lunch" }

/** Discovery metadata of the tool (x402 Bazaar extension, MCP form), built by the official package. */
const mcpDiscovery = declareDiscoveryExtension({
  toolName: TOOL_NAME,
  description: "Estimate calories, protein, carbohydrate and fat from one food photo",
  transport: "streamable-http",
  inputSchema: declaredInputSchema,
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
  icons: ICONS,
  description: [
    "Estimate calories, protein, carbohydrate and fat from one JPEG or PNG photo of food (max 2 MB, 16–2048 px per side).",
    "Use it when the user shares a photo of a meal, a dish or a snack and wants to know its calories or macronutrients; not for text descriptions of food, packaged-food labels or non-food images.",
    "Cost: 0.01 USDC or one prepaid credit per successful analysis; listing tools and every failed call (invalid input, no food, analysis failure or timeout, a limit) are free.",
    "Returns the dish name, its food components with estimated edible grams, nutrition per component and for the whole meal.",
    "Every value is an estimate: model_confidence is the model's own uncalibrated rating; results are not medical or allergen advice.",
    "Give the photo as image_base64 with mime_type, or as image_file when the host hands over a file the user attached ({ download_url, file_id }; never both).",
    "Pass known_total_grams only when all edible food in the photo was weighed.",
    "To pay with credits, the connection carries the API key (Authorization: Bearer <key>);",
    `to pay per call over x402, put the PaymentPayload object in params._meta["${PAYMENT_META_KEY}"]; the receipt comes back in`,
    `result._meta["${PAYMENT_RESPONSE_META_KEY}"]. Without either, the result is an error carrying the x402 PaymentRequired challenge (when this server accepts x402).`,
    "Reuse the same idempotency_key to retry or to recover a result for 24 hours; use a new key for a new photo.",
    "Errors have isError true and structuredContent { error: { code, message, request_id? } } with the REST API's error codes.",
    `Feedback on a result is not a tool: POST ${publicBaseUrl}/v1/credits/feedback with the request_id (credit keys only).`
  ].join(" "),
  inputSchema: { ...declaredInputSchema, type: "object" },
  outputSchema: { ...outputSchema, type: "object" },
  // Hosts that show MCP Apps render the result with this resource (and offer its photo picker).
  // ChatGPT hands a photo the user attached in the chat to image_file (OpenAI Apps SDK file parameters).
  _meta: { ui: { resourceUri: APP_URI }, [RESOURCE_URI_META_KEY]: APP_URI, [FILE_PARAMS_META_KEY]: [FILE_ARGUMENT] },
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

/**
 * Whether a value written as JSON would take more than `max` characters: counted as it is walked, and stopped as soon
 * as it does, so a huge value costs no more than a small one.
 */
export const jsonLongerThan = (value: unknown, max: number): boolean => {
  let length = 0
  const pending: Array<unknown> = [value]
  while (pending.length > 0) {
    const next = pending.pop()
    if (typeof next === "string") length += next.length + 2
    else if (typeof next === "number" || typeof next === "boolean") length += String(next).length
    else if (Array.isArray(next)) {
      length += 1 + next.length
      if (length > max) return true
      for (const child of next) pending.push(child)
    } else if (Predicate.isRecord(next)) {
      length += 1
      for (const [key, child] of Object.entries(next)) {
        length += key.length + 4
        if (length > max) return true
        pending.push(child)
      }
    } else length += 4
    if (length > max) return true
  }
  return false
}

/** How much a tool's arguments may hold before they are decoded element by element. */
export interface ArgumentBounds {
  /** The most characters the arguments may take as JSON. */
  readonly maxChars?: number
  /** Arrays at the top of the arguments and their most elements (the schema's own message for more). */
  readonly arrays?: ReadonlyArray<{ readonly key: string; readonly max: number; readonly message: string }>
}

const boundsRefusal = (args: unknown, bounds: ArgumentBounds): InvalidRequest | undefined => {
  if (Predicate.isRecord(args)) {
    for (const { key, max, message } of bounds.arrays ?? []) {
      const value = Object.hasOwn(args, key) ? args[key] : undefined
      if (Array.isArray(value) && value.length > max) return schemaRejection([{ path: [key], message }], "invalid arguments")
    }
  }
  if (bounds.maxChars !== undefined && jsonLongerThan(args, bounds.maxChars)) {
    return schemaRejection([{ path: [], message: `the arguments take more than ${bounds.maxChars} characters as JSON` }], "invalid arguments")
  }
  return undefined
}

/**
 * Decodes a tool's arguments; a rejection carries the same code and message shape as REST's 400 for that field. With
 * bounds, arguments past them are refused first, by a count and a walk that stops early, before any element is decoded.
 */
export const decodeArguments = <A, I>(schema: Schema.Schema<A, I>, args: unknown, bounds: ArgumentBounds = {}): Either.Either<A, InvalidRequest> => {
  const outside = boundsRefusal(args, bounds)
  if (outside !== undefined) return Either.left(outside)
  if (valueNestsDeeperThan(args, MAX_JSON_DEPTH)) return Either.left(tooDeep("the arguments are"))
  return Either.mapLeft(Schema.decodeUnknownEither(schema, { errors: "all" })(args ?? {}), (error) =>
    schemaRejection(
      ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => ({ path: pathOf(issue.path), message: issue.message })),
      "invalid arguments"
    )
  )
}

/** Decodes `analyze_food`'s arguments with the REST schemas. */
export const decodeInput = (args: unknown): Either.Either<ToolInput, InvalidRequest> => decodeArguments(ToolInput, args)

/** The x402 payment of a call: the PaymentPayload object in its metadata, read by the x402 rail as REST's PAYMENT-SIGNATURE is. */
export const paymentOf = (meta: Readonly<Record<string, unknown>> | undefined): Option.Option<PaymentProof> =>
  meta !== undefined && Object.hasOwn(meta, PAYMENT_META_KEY) && meta[PAYMENT_META_KEY] !== undefined
    ? Option.some(PaymentProof.Json({ value: meta[PAYMENT_META_KEY] }))
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

/** REST's words for where things go, in the tool's own: its argument, its `_meta`, the challenge in this very result. */
const TOOL_WORDS: ReadonlyArray<readonly [string, string]> = [
  ["(see PAYMENT-REQUIRED)", "(the PaymentRequired in this result)"],
  ["PAYMENT-SIGNATURE", `_meta["${PAYMENT_META_KEY}"]`],
  ["Idempotency-Key", "idempotency_key"],
  ["Authorization (credits)", "a Bearer key on the connection (credits)"]
]

/** A message of the shared pipeline as a tool caller reads it: no HTTP header it never sees. */
export const inToolWords = (message: string): string =>
  TOOL_WORDS.reduce((words, [rest, tool]) => words.replaceAll(rest, tool), message)

const errorInToolWords = <E extends { readonly message: string }>(error: E): E => ({ ...error, message: inToolWords(error.message) })

/**
 * An error as a tool result with the REST error code. A price challenge follows x402's MCP transport: the
 * PaymentRequired as structuredContent and, wrapped in `x402/error`, as the first text; after a settlement that
 * failed for good, its receipt beside it and nothing of the analysis.
 */
export const errorResult = (failure: AnalyzeError, forTool: (challenge: X402PaymentRequired) => X402PaymentRequired): CallToolResult => {
  const error = errorInToolWords(failure.error)
  if (failure._tag === "PaymentRequired" && failure.payment_required !== undefined) {
    const retargeted = forTool(failure.payment_required)
    const failedReceipt = Option.fromNullable(failure.payment_response)
    const challenge = {
      ...retargeted,
      ...(retargeted.error === undefined ? {} : { error: inToolWords(retargeted.error) }),
      ...Option.match(failedReceipt, { onNone: () => ({}), onSome: (receipt) => ({ [PAYMENT_RESPONSE_META_KEY]: receipt }) })
    }
    return {
      isError: true,
      content: [text({ "x402/error": { code: 402, message: error.message, data: challenge } }), text({ error })],
      structuredContent: challenge,
      ...receiptMeta(failedReceipt)
    }
  }
  const pending = failure._tag === "ServiceUnavailable" ? Option.fromNullable(failure.payment_response) : Option.none()
  const retryAfter =
    failure._tag === "TooManyRequests" || failure._tag === "ServiceUnavailable" ? Option.fromNullable(failure.retryAfterSeconds) : Option.none()
  const body = {
    error,
    ...Option.match(pending, { onNone: () => ({}), onSome: (receipt) => ({ payment_response: receipt }) }),
    ...Option.match(retryAfter, { onNone: () => ({}), onSome: (seconds) => ({ retry_after_seconds: seconds }) })
  }
  return { isError: true, content: [text(body)], structuredContent: body, ...receiptMeta(pending) }
}
