/** Wire schemas of the public contract (SPEC §2): requests, results, balances, orders and feedback. */
import { Schema } from "effect"

/** Structs sent by callers reject unknown fields (SPEC: "additional properties rejected"). */
const closed = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.Struct(fields).annotations({ parseOptions: { onExcessProperty: "error" } })

export const Uuid = Schema.UUID.annotations({ description: "UUID" })

export const UuidV4 = Schema.String.pipe(
  Schema.pattern(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i),
  Schema.annotations({ identifier: "UuidV4", description: "UUID version 4 chosen by the client", format: "uuid" })
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

export const AnalyzeRequest = closed({
  image_base64: ImageBase64,
  mime_type: ImageMimeType,
  language: Schema.optionalWith(Language, { default: () => "en" as const }),
  known_total_grams: Schema.optional(KnownTotalGrams)
}).annotations({ identifier: "AnalyzeRequest" })
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

export const AnalysisResult = Schema.Struct({
  request_id: Uuid,
  dish_name: Schema.String,
  items: Schema.Array(ResultItem).pipe(Schema.maxItems(20)),
  totals: Nutrition,
  estimated_total_grams: Schema.Number,
  estimate: Schema.Literal(true),
  model: Schema.String,
  matcher_version: Schema.String,
  processing_ms: Schema.Int.pipe(Schema.nonNegative()),
  portion_basis: Schema.optional(PortionBasis)
}).annotations({ identifier: "AnalysisResult" })
export type AnalysisResult = typeof AnalysisResult.Type

export const Balance = Schema.Struct({
  credits_remaining: Schema.Int.pipe(Schema.nonNegative()),
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
  credits_remaining: Schema.Int.pipe(Schema.nonNegative()),
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
  sandbox: Schema.Boolean
}).annotations({ identifier: "Health" })
