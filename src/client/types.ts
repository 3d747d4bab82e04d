/** The shapes `morsel/client` sends and receives: SPEC §2 and CONTRACT's foods and nutrition, as plain TypeScript. */

export type Language = "en" | "lt"

/** SPEC §2.2 nutrition object. */
export interface Nutrition {
  readonly kcal: number
  readonly protein_g: number
  readonly carbs_g: number
  readonly fat_g: number
}

export interface ResultItem {
  readonly name: string
  /** English food-database query text. */
  readonly query: string
  readonly estimated_grams: number
  /** The model's own uncalibrated rating, not a probability of accuracy. */
  readonly model_confidence: number
  readonly nutrition_source: "usda" | "ai"
  readonly fdc_id: string | null
  readonly matched_name: string | null
  readonly per_100g: Nutrition
  readonly nutrition: Nutrition
}

/** x402 settlement receipt (the PAYMENT-RESPONSE header, decoded). */
export interface SettlementReceipt {
  readonly success: boolean
  readonly network: string
  readonly transaction: string
  readonly payer?: string
  readonly [field: string]: unknown
}

/** SPEC §2.2 analysis result; `receipt` is added by the client when the analysis was paid over x402. */
export interface AnalysisResult {
  readonly request_id: string
  readonly dish_name: string
  readonly items: ReadonlyArray<ResultItem>
  readonly totals: Nutrition
  readonly estimated_total_grams: number
  readonly estimate: true
  readonly model: string
  readonly matcher_version: string
  readonly processing_ms: number
  readonly portion_basis?: {
    readonly type: "supplied_total"
    readonly total_grams: number
    readonly allocation: "photo_estimated_proportions"
  }
  /** The x402 settlement receipt; absent when paid with credits. */
  readonly receipt?: SettlementReceipt
}

/** SPEC §2.3. */
export interface Balance {
  readonly credits_remaining: number
  readonly blocked: boolean
  readonly test_mode: boolean
}

export type OrderState = "open" | "paid" | "expired" | "unresolved" | "reversed" | "not_issued"

/** SPEC §2.4 context of a checkout order. */
export interface OrderContext {
  readonly channel?: "website" | "node_quickstart" | "agent" | "unspecified"
  readonly discovery?: "search" | "ai_assistant" | "article" | "referral" | "other" | "unspecified"
  readonly use_case?: "food_logging" | "agent_tool" | "meal_planning" | "research" | "other" | "unspecified"
}

/** SPEC §4.4 answer. */
export interface Checkout {
  readonly order_id: string
  readonly checkout_url?: string
  readonly session_id?: string
  readonly credits?: 500
  readonly amount_usd?: "5.00"
  readonly state?: "paid" | "reversed"
}

/** SPEC §4.6 answer. */
export interface CheckoutStatus {
  readonly order_id: string
  readonly state: OrderState
  readonly credits_remaining: number
  readonly blocked: boolean
  readonly test_mode: boolean
  readonly checkout_url?: string
}

export type FeedbackCategory = "helpful" | "wrong_food" | "wrong_portion" | "wrong_nutrition" | "integration_problem" | "other"

/** SPEC §4.7 answer. */
export interface FeedbackReceipt {
  readonly recorded: true
  readonly duplicate: boolean
  readonly request_id: string
}

/** GET /health (the fields a client reads; the server may add more). */
export interface Health {
  readonly version: string
  readonly network: string
  readonly test_mode: boolean
  readonly sandbox?: boolean
  readonly card_credits_enabled?: boolean
  readonly x402_enabled?: boolean
  readonly operator?: {
    readonly name: string | null
    readonly support_contact: string | null
    readonly terms_url?: string | null
    readonly privacy_url?: string | null
  }
  readonly [field: string]: unknown
}

/** Nutrition of the foods endpoints: SPEC's four fields and nine more, null where the record lacks them. */
export interface FullNutrition extends Nutrition {
  readonly fiber_g: number | null
  readonly sugars_g: number | null
  readonly saturated_fat_g: number | null
  readonly sodium_mg: number | null
  readonly cholesterol_mg: number | null
  readonly potassium_mg: number | null
  readonly calcium_mg: number | null
  readonly iron_mg: number | null
  readonly vitamin_c_mg: number | null
}

export interface Portion {
  readonly amount: number
  readonly unit: string
  readonly grams: number
}

/** A food of the local database (CONTRACT "Foods and nutrition"). */
export interface Food {
  readonly fdc_id: string
  readonly name: string
  readonly food_group: string | null
  readonly per_100g: FullNutrition
  readonly portions: ReadonlyArray<Portion>
}

export interface FoodSearch {
  readonly foods: ReadonlyArray<Food>
  readonly matcher_version: string
}

/** One item of POST /v1/nutrition: a `query` or an `fdc_id`, and `grams` or a `portion`. */
export type NutritionItem = ({ readonly query: string; readonly fdc_id?: never } | { readonly fdc_id: string; readonly query?: never }) &
  ({ readonly grams: number; readonly portion?: never } | { readonly portion: { readonly amount: number; readonly unit: string }; readonly grams?: never }) & {
    readonly name?: string
  }

/** A meal in words for POST /v1/nutrition: what a person wrote, up to 2,000 characters and 20 foods. */
export interface MealText {
  readonly text: string
}

/** How a meal in words gave an item's grams: a weight or measuring unit, a household word/container/count, or no amount. */
export type GramsBasis = "stated" | "portion" | "typical"

export interface NutritionResultItem {
  readonly name: string
  readonly query: string
  /** A meal in words: the words this food was read from. */
  readonly text?: string
  readonly grams_basis?: GramsBasis
  readonly fdc_id: string
  readonly matched_name: string
  readonly per_100g: FullNutrition
  readonly nutrition: FullNutrition
  readonly nutrition_source: "usda"
  readonly grams: number
  readonly portion?: Portion
}

export interface NutritionResult {
  readonly items: ReadonlyArray<NutritionResultItem>
  readonly totals: FullNutrition
  readonly total_grams: number
  readonly complete: boolean
  readonly unmatched: ReadonlyArray<{
    readonly index: number
    readonly query: string
    /** A meal in words: the words the food was read from. */
    readonly text?: string
    readonly suggestions: ReadonlyArray<{ readonly fdc_id: string; readonly name: string }>
  }>
  readonly estimate: true
  readonly matcher_version: string
}

/** A photo as the API takes it (SPEC §2.1), and what was done to make it so. */
export interface PreparedPhoto {
  readonly bytes: Uint8Array
  readonly mime: "image/jpeg" | "image/png"
  /** One line on what was changed ("IMG_1.jpg: 3024×4032 JPEG 5.1 MB → 1536×2048 JPEG 0.9 MB, turned upright"); absent when sent as it is. */
  readonly change: string | undefined
}

/**
 * Everything the identical retry of an analysis needs (SPEC §3.1): its body, Idempotency-Key and, on x402, the
 * signed authorization. JSON-safe: keep it (it holds a signed payment, so keep it private) and pass it to
 * `client.resume`. It never holds the credit key.
 */
export interface PendingAnalysis {
  readonly body: {
    readonly image_base64: string
    readonly mime_type: "image/jpeg" | "image/png"
    readonly language: Language
    readonly known_total_grams?: number
  }
  readonly idempotencyKey: string
  readonly paymentSignature?: string
  readonly scenario?: string
}
