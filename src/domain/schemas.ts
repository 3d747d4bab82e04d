/** Wire schemas of the public contract: requests, results, balances, orders and feedback. */
import type { PaymentRequired, SettleResponse } from "@x402/core/types"
import { JSONSchema, Schema } from "effect"

/** Structs sent by callers reject unknown fields. */
const closed = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.Struct(fields).annotations({ parseOptions: { onExcessProperty: "error" } })

/**
 * A UUID as callers write it (any letter case: Swift and .NET print upper case) decoded to lower case, the one form
 * that is stored, sent to the card processor, compared with what it echoes back, and answered.
 */
const canonicalUuid = (wire: Schema.Schema<string>) =>
  Schema.transform(wire, Schema.typeSchema(wire), { strict: true, decode: (id) => id.toLowerCase(), encode: (id) => id })

export const Uuid = canonicalUuid(Schema.UUID.annotations({ description: "UUID (any letter case; answered in lower case)" }))

export const UuidV4 = canonicalUuid(
  Schema.String.pipe(
    Schema.pattern(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i),
    Schema.annotations({
      identifier: "UuidV4",
      description: "UUID version 4 chosen by the client (any letter case; answered in lower case)",
      format: "uuid"
    })
  )
)

export const IdempotencyKey = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]{16,128}$/),
  Schema.annotations({
    identifier: "IdempotencyKey",
    description: "16 to 128 letters, digits, underscores or hyphens; one key per distinct input"
  })
)

export const ImageMimeType = Schema.Literal("image/jpeg", "image/png")
export const Language = Schema.Literal("en", "lt").annotations({
  description: "Language of dish and item names (en or lt); food-database queries stay in English",
  default: "en"
})

const hasAtMostTwoDecimals = (n: number) => Math.abs(n * 100 - Math.round(n * 100)) < 1e-6

export const KnownTotalGrams = Schema.Number.pipe(
  Schema.finite(),
  Schema.between(1, 5000),
  Schema.filter(hasAtMostTwoDecimals, { message: () => "known_total_grams allows at most two decimal places" }),
  Schema.annotations({
    identifier: "KnownTotalGrams",
    title: "known_total_grams",
    description:
      "Measured weight in grams of all edible food in the image (1 to 5000, at most two decimals). Omit when unknown or when only part of the meal was weighed."
  })
)

/**
 * The image travels as standard base64. Its size, alphabet, format and pixel dimensions are checked by the
 * image inspector so that an oversized image gets 413 rather than a schema 400.
 */
export const ImageBase64 = Schema.String.annotations({
  description: "JPEG or PNG as standard base64: at most 2666668 characters, 2,000,000 bytes decoded, 16 to 2048 px per side",
  jsonSchema: { maxLength: 2666668, contentEncoding: "base64" }
})

/** An example request body (the image is a placeholder): shown in the API reference and in x402 discovery metadata. */
export const analyzeRequestExample = {
  image_base64: "<standard base64 of the JPEG or PNG photo>",
  mime_type: "image/jpeg",
  language: "en"
} as const

export const AnalyzeRequest = closed({
  image_base64: ImageBase64,
  mime_type: ImageMimeType,
  language: Schema.optionalWith(Language, { default: () => "en" as const }),
  known_total_grams: Schema.optional(KnownTotalGrams)
}).annotations({ identifier: "AnalyzeRequest", examples: [analyzeRequestExample] })
export type AnalyzeRequest = typeof AnalyzeRequest.Type

const NonNegative = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

export const Nutrition = Schema.Struct({
  kcal: NonNegative,
  protein_g: NonNegative,
  carbs_g: NonNegative,
  fat_g: NonNegative
}).annotations({ identifier: "Nutrition" })
export type Nutrition = typeof Nutrition.Type

export const NutritionSource = Schema.Literal("usda", "ai")

export const ResultItem = Schema.Struct({
  name: Schema.String,
  query: Schema.String.annotations({ description: "English food-database query text" }),
  estimated_grams: Schema.Number.pipe(Schema.finite(), Schema.greaterThanOrEqualTo(0.01)),
  model_confidence: Schema.Number.pipe(Schema.between(0, 1)).annotations({
    description: "The model's own uncalibrated rating, not a probability of accuracy"
  }),
  nutrition_source: NutritionSource,
  fdc_id: Schema.NullOr(Schema.String),
  matched_name: Schema.NullOr(Schema.String),
  per_100g: Nutrition,
  nutrition: Nutrition
}).annotations({ identifier: "ResultItem" })
export type ResultItem = typeof ResultItem.Type

export const PortionBasis = Schema.Struct({
  type: Schema.Literal("supplied_total"),
  total_grams: Schema.Number.pipe(Schema.between(1, 5000)),
  allocation: Schema.Literal("photo_estimated_proportions")
}).annotations({ identifier: "PortionBasis" })

const nutrition = (kcal: number, protein_g: number, carbs_g: number, fat_g: number): Nutrition => ({ kcal, protein_g, carbs_g, fat_g })

/** An example result whose figures add up as real ones do: shown in the API reference and in x402 discovery metadata. */
export const analysisResultExample = {
  request_id: "3f1c2a9e-7b4d-4c1e-9a2f-5d6e7f8a9b0c",
  dish_name: "Grilled chicken with rice",
  items: [
    {
      name: "Grilled chicken breast",
      query: "chicken breast roasted",
      estimated_grams: 150,
      model_confidence: 0.86,
      nutrition_source: "usda",
      fdc_id: "171477",
      matched_name: "Chicken, broilers or fryers, breast, meat only, cooked, roasted",
      per_100g: nutrition(165, 31, 0, 3.6),
      nutrition: nutrition(247.5, 46.5, 0, 5.4)
    },
    {
      name: "White rice",
      query: "rice white cooked",
      estimated_grams: 180,
      model_confidence: 0.8,
      nutrition_source: "usda",
      fdc_id: "168878",
      matched_name: "Rice, white, long-grain, regular, enriched, cooked",
      per_100g: nutrition(130, 2.7, 28.2, 0.3),
      nutrition: nutrition(234, 4.9, 50.8, 0.5)
    },
    {
      name: "Olive oil",
      query: "olive oil",
      estimated_grams: 10,
      model_confidence: 0.55,
      nutrition_source: "ai",
      fdc_id: null,
      matched_name: null,
      per_100g: nutrition(884, 0, 0, 100),
      nutrition: nutrition(88.4, 0, 0, 10)
    }
  ],
  totals: nutrition(569.9, 51.4, 50.8, 15.9),
  estimated_total_grams: 340,
  estimate: true,
  model: "gpt-5-mini",
  matcher_version: "usda-match-7",
  processing_ms: 2140
} as const

export const AnalysisResult = Schema.Struct({
  request_id: Uuid,
  dish_name: Schema.String,
  items: Schema.Array(ResultItem).pipe(Schema.maxItems(20)),
  totals: Nutrition,
  estimated_total_grams: Schema.Number,
  estimate: Schema.Literal(true),
  model: Schema.String,
  matcher_version: Schema.String,
  processing_ms: Schema.NonNegativeInt,
  portion_basis: Schema.optional(PortionBasis)
}).annotations({ identifier: "AnalysisResult", examples: [analysisResultExample] })
export type AnalysisResult = typeof AnalysisResult.Type

export const Balance = Schema.Struct({
  credits_remaining: Schema.NonNegativeInt,
  blocked: Schema.Boolean,
  test_mode: Schema.Boolean.annotations({ description: "true when the server runs against the card processor's test mode" })
}).annotations({ identifier: "Balance" })
export type Balance = typeof Balance.Type

export const SessionId = Schema.String.pipe(
  Schema.pattern(/^cs_(live|test)_[A-Za-z0-9]+$/),
  Schema.annotations({ identifier: "SessionId", description: "Checkout session: cs_live_ followed by letters or digits (cs_test_ in test mode)" })
)

export const OrderState = Schema.Literal("open", "paid", "expired", "unresolved", "reversed", "not_issued")
export type OrderState = typeof OrderState.Type

export const OrderContext = closed({
  channel: Schema.optional(Schema.Literal("website", "node_quickstart", "agent", "unspecified")),
  discovery: Schema.optional(Schema.Literal("search", "ai_assistant", "article", "referral", "other", "unspecified")),
  use_case: Schema.optional(Schema.Literal("food_logging", "agent_tool", "meal_planning", "research", "other", "unspecified"))
}).annotations({ identifier: "OrderContext" })

export const CheckoutRequest = closed({
  order_id: UuidV4,
  context: Schema.optional(OrderContext)
}).annotations({ identifier: "CheckoutRequest" })

export const CheckoutResponse = Schema.Struct({
  order_id: Uuid,
  checkout_url: Schema.optional(Schema.String.annotations({ format: "uri" })),
  session_id: Schema.optional(Schema.String),
  credits: Schema.optional(Schema.Literal(500)),
  amount_usd: Schema.optional(Schema.Literal("5.00")),
  state: Schema.optional(Schema.Literal("paid", "reversed"))
}).annotations({ identifier: "CheckoutResponse" })

export const ConfirmRequest = closed({ session_id: SessionId }).annotations({ identifier: "ConfirmRequest" })

export const CheckoutStatusRequest = closed({ order_id: UuidV4 }).annotations({ identifier: "CheckoutStatusRequest" })

export const CheckoutStatus = Schema.Struct({
  order_id: Uuid,
  state: OrderState,
  credits_remaining: Schema.NonNegativeInt,
  blocked: Schema.Boolean,
  test_mode: Schema.Boolean,
  checkout_url: Schema.optional(Schema.String.annotations({ format: "uri" }))
}).annotations({ identifier: "CheckoutStatus" })

export const FeedbackCategory = Schema.Literal(
  "helpful",
  "wrong_food",
  "wrong_portion",
  "wrong_nutrition",
  "integration_problem",
  "other"
)

export const FeedbackRequest = closed({
  request_id: Uuid,
  category: FeedbackCategory,
  note: Schema.optionalWith(
    Schema.String.pipe(Schema.maxLength(500)).annotations({
      description: "At most 500 characters; must not contain keys or personal information"
    }),
    { default: () => "" }
  )
}).annotations({ identifier: "FeedbackRequest" })

export const FeedbackReceipt = Schema.Struct({
  recorded: Schema.Literal(true),
  duplicate: Schema.Boolean,
  request_id: Uuid
}).annotations({ identifier: "FeedbackReceipt" })

export const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  service: Schema.Literal("morsel"),
  version: Schema.String,
  api_version: Schema.String,
  payment_network: Schema.String,
  x402_enabled: Schema.Boolean,
  card_credits_enabled: Schema.Boolean,
  test_mode: Schema.Boolean,
  /** Served by `morsel serve --sandbox`: every outside service simulated, nothing real is charged. */
  sandbox: Schema.Boolean,
  /** Who runs this instance and how a cardholder reaches them; null where the operator set nothing. */
  operator: Schema.Struct({
    name: Schema.NullOr(Schema.String),
    /** An e-mail address or an http(s) URL. */
    support_contact: Schema.NullOr(Schema.String),
    terms_url: Schema.NullOr(Schema.String),
    privacy_url: Schema.NullOr(Schema.String)
  })
}).annotations({ identifier: "Health" })

/**
 * An object whose shape the x402 protocol defines: documented by its JSON Schema, passed through as is.
 * Not Schema.Unknown, whose JSON schema repeats one "$id" wherever it is used, which OpenAPI and ajv reject.
 */
const X402Object = <A>(is: (u: unknown) => u is A, jsonSchema: object) => Schema.declare(is, { jsonSchema: { type: "object", ...jsonSchema } })

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } => typeof u === "object" && u !== null && !Array.isArray(u)

const decimalString = { type: "string", pattern: "^[0-9]+$" }

/** The x402 v2 PaymentRequired object: the price challenge (also base64-encoded in the PAYMENT-REQUIRED header). */
export const X402PaymentRequired = X402Object((u): u is PaymentRequired => isRecord(u) && u["x402Version"] === 2 && Array.isArray(u["accepts"]), {
  description: "x402 v2 PaymentRequired: what to pay, to whom and on which network; extensions.bazaar describes the resource",
  required: ["x402Version", "resource", "accepts"],
  properties: {
    x402Version: { type: "integer", const: 2 },
    error: { type: "string", description: "Why the previous payment was refused" },
    resource: {
      type: "object",
      required: ["url"],
      properties: {
        url: { type: "string", format: "uri" },
        description: { type: "string" },
        mimeType: { type: "string" },
        serviceName: { type: "string" },
        tags: { type: "array", items: { type: "string" } }
      }
    },
    accepts: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        required: ["scheme", "network", "amount", "asset", "payTo", "maxTimeoutSeconds", "extra"],
        properties: {
          scheme: { type: "string", const: "exact" },
          network: { type: "string", description: "CAIP-2 network id" },
          amount: { ...decimalString, description: "Price in the asset's smallest units" },
          asset: { type: "string", description: "Token contract address" },
          payTo: { type: "string", description: "Recipient address" },
          maxTimeoutSeconds: { type: "integer" },
          extra: { type: "object", description: "The token's EIP-712 domain name and version" }
        }
      }
    },
    extensions: { type: "object", description: "x402 extensions; bazaar: discovery metadata (info and the JSON Schema it follows)" }
  }
}).annotations({ identifier: "X402PaymentRequired" })
export type X402PaymentRequired = typeof X402PaymentRequired.Type

/** The x402 v2 settlement receipt (base64-encoded in the PAYMENT-RESPONSE header). */
export const X402SettleResponse = X402Object((u): u is SettleResponse => isRecord(u) && typeof u["success"] === "boolean" && typeof u["network"] === "string", {
  description: "x402 v2 settlement receipt; errorReason settlement_pending while the transfer is unconfirmed",
  required: ["success", "transaction", "network"],
  properties: {
    success: { type: "boolean" },
    errorReason: { type: "string" },
    transaction: { type: "string", description: "Transaction hash (empty while none is known)" },
    network: { type: "string" },
    payer: { type: "string" }
  }
}).annotations({ identifier: "X402SettleResponse" })

/**
 * A schema's JSON Schema for other protocols (MCP tools, x402 discovery): no "$schema" (their dialect, 2020-12,
 * reads these keywords alike). Inlined, it has no "$ref" at all, since several model providers and x402 facilitators
 * do not follow references, nor the root's examples, which travel next to it; otherwise references point into "$defs".
 */
export const jsonSchemaOf = (schema: Schema.Schema.AnyNoContext, options: { readonly inline: boolean }): Record<string, unknown> => {
  const { $defs = {}, $schema: _dialect, ...root } = JSONSchema.make(schema)
  if (!options.inline) return Object.keys($defs).length === 0 ? root : { ...root, $defs }
  const fields = (node: object): Record<string, unknown> =>
    Object.fromEntries(Object.entries(node).map(([key, value]) => [key, resolve(value)]))
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve)
    if (typeof node !== "object" || node === null) return node
    const ref = "$ref" in node && typeof node.$ref === "string" ? node.$ref.replace(/^#\/\$defs\//, "") : undefined
    return ref !== undefined && ref in $defs ? resolve($defs[ref]) : fields(node)
  }
  const { examples: _examples, ...inlined } = fields(resolve(root) ?? {})
  return inlined
}
