/** Wire schemas of food search, food lookups and nutrition for named foods (CONTRACT "Foods and nutrition"). */
import { Schema } from "effect"

/** Structs sent by callers reject unknown fields. */
const closed = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.Struct(fields).annotations({ parseOptions: { onExcessProperty: "error" } })

const Amount = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())
const Maybe = (description: string) => Schema.NullOr(Amount).annotations({ description: `${description}; null when the record lacks it (never 0 for unknown)` })

/** SPEC's four fields, always present, and the nine more nutrients, null where the record lacks them. */
export const FoodNutrition = Schema.Struct({
  kcal: Amount,
  protein_g: Amount,
  carbs_g: Amount,
  fat_g: Amount,
  fiber_g: Maybe("Dietary fiber, g"),
  sugars_g: Maybe("Total sugars, g"),
  saturated_fat_g: Maybe("Saturated fat, g"),
  sodium_mg: Maybe("Sodium, mg"),
  cholesterol_mg: Maybe("Cholesterol, mg"),
  potassium_mg: Maybe("Potassium, mg"),
  calcium_mg: Maybe("Calcium, mg"),
  iron_mg: Maybe("Iron, mg"),
  vitamin_c_mg: Maybe("Vitamin C, mg")
}).annotations({ identifier: "FoodNutrition" })
export type FoodNutrition = typeof FoodNutrition.Type

export const Portion = Schema.Struct({
  amount: Amount,
  unit: Schema.String.annotations({ description: "Household measure of the database, e.g. \"cup, chopped\"" }),
  grams: Amount
}).annotations({ identifier: "Portion" })

export const Food = Schema.Struct({
  fdc_id: Schema.String.annotations({ description: "The record's id, the string analysis items carry as fdc_id" }),
  name: Schema.String,
  food_group: Schema.NullOr(Schema.String),
  per_100g: FoodNutrition,
  portions: Schema.Array(Portion)
}).annotations({ identifier: "Food" })
export type Food = typeof Food.Type

export const FoodList = Schema.Struct({
  foods: Schema.Array(Food).annotations({ description: "Best first: the plain, everyday record for the text ranks first; empty when nothing fits" }),
  matcher_version: Schema.String
}).annotations({ identifier: "FoodList" })

export const SEARCH_TEXT_MAX = 200
export const SEARCH_LIMIT_MAX = 25
export const SEARCH_LIMIT_DEFAULT = 10
export const NUTRITION_ITEMS_MAX = 20

export const SearchText = Schema.String.pipe(
  Schema.minLength(1, { message: () => "a search text of 1 to 200 characters is required" }),
  Schema.maxLength(SEARCH_TEXT_MAX, { message: () => "at most 200 characters" })
).annotations({ description: "Food text, 1–200 characters", examples: ["tofu"] })

export const SearchLimit = Schema.Int.pipe(
  Schema.between(1, SEARCH_LIMIT_MAX, { message: () => "a whole number from 1 to 25" })
).annotations({ description: "How many foods, 1–25 (default 10)" })

export const FoodsSearchParams = Schema.Struct({
  q: SearchText,
  limit: Schema.optional(Schema.compose(Schema.NumberFromString, SearchLimit, { strict: false }))
})

export const FoodIdPath = Schema.Struct({ fdc_id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(40)) })

const twoDecimals = (n: number) => Math.abs(n * 100 - Math.round(n * 100)) < 1e-6

/** The bound of an item's grams, given or from a portion. */
export const GRAMS_MIN = 0.01
export const GRAMS_MAX = 5000

const Grams = Schema.Number.pipe(
  Schema.finite(),
  Schema.between(GRAMS_MIN, GRAMS_MAX, { message: () => "from 0.01 to 5000" }),
  Schema.filter((n) => twoDecimals(n) || "at most two decimals")
).annotations({ description: "Grams, 0.01–5000, at most two decimals" })

const PortionRequest = closed({
  amount: Schema.Number.pipe(Schema.finite(), Schema.positive({ message: () => "a number above 0" })),
  unit: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)).annotations({
    description: "A unit of the food's portions, matched case-blind on the whole unit or its first word (\"large\", \"cup\")"
  })
}).annotations({ identifier: "PortionRequest" })

export const NutritionItemRequest = closed({
  query: Schema.optional(SearchText.annotations({ description: "English food text, matched as analysis queries are" })),
  fdc_id: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(40))),
  grams: Schema.optional(Grams),
  portion: Schema.optional(PortionRequest),
  name: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({ description: "Shown name, echoed" }))
})
  .pipe(
    Schema.filter((item) =>
      (item.query === undefined) === (item.fdc_id === undefined)
        ? { path: ["query"], message: "exactly one of query or fdc_id" }
        : (item.grams === undefined) === (item.portion === undefined)
          ? { path: ["grams"], message: "exactly one of grams or portion" }
          : undefined
    )
  )
  .annotations({ identifier: "NutritionItemRequest", description: "Exactly one of query or fdc_id; exactly one of grams or portion" })
export type NutritionItemRequest = typeof NutritionItemRequest.Type

/** A meal in words: at most 2,000 characters (Unicode code points) and 20 foods. */
export const NUTRITION_TEXT_MAX = 2000
export const NUTRITION_TEXT_FOODS_MAX = 20

const codePoints = (text: string) => {
  let n = 0
  for (const _ of text) n++
  return n
}

const MealText = Schema.String.pipe(
  Schema.filter((text) => /\S/u.test(text) || "a meal in words of 1 to 2,000 characters is required"),
  Schema.filter((text) => codePoints(text) <= NUTRITION_TEXT_MAX || "at most 2,000 characters")
).annotations({
  description:
    "A meal as a person writes it, in English, 1–2,000 characters and at most 20 foods: \"2 eggs, a slice of toast with butter and a latte\". Read into foods and amounts (docs/foods.md, \"A meal in words\")",
  examples: ["2 eggs, a slice of toast with butter and a latte"]
})

export const NutritionRequest = closed({
  items: Schema.optional(
    Schema.Array(NutritionItemRequest).pipe(
      Schema.minItems(1, { message: () => "1 to 20 items" }),
      Schema.maxItems(NUTRITION_ITEMS_MAX, { message: () => "at most 20 items" })
    )
  ),
  text: Schema.optional(MealText),
  language: Schema.optional(Schema.Literal("en", "lt")).annotations({ description: "Language of the answer's words (default en)" })
})
  .pipe(Schema.filter((body) => (body.items === undefined) === (body.text === undefined) ? { path: ["text"], message: "exactly one of items or text" } : undefined))
  .annotations({ identifier: "NutritionRequest", description: "Exactly one of items (foods named one by one) or text (a meal in words)" })
export type NutritionRequest = typeof NutritionRequest.Type

export const GramsBasis = Schema.Literal("stated", "portion", "typical").annotations({
  description:
    "How a meal in words gave the grams: stated (a weight or a measuring unit: g, kg, oz, lb, ml, l, fl oz, cup, tbsp, tsp), portion (a household word, container or count), typical (no amount: one typical serving)"
})

export const NutritionItem = Schema.Struct({
  name: Schema.String,
  query: Schema.String,
  text: Schema.optional(Schema.String.annotations({ description: "A meal in words: the words this food was read from, exactly as they stand in the text" })),
  grams: Amount,
  grams_basis: Schema.optional(GramsBasis),
  portion: Schema.optional(Portion.annotations({ description: "The portion as used" })),
  nutrition_source: Schema.Literal("usda"),
  fdc_id: Schema.String,
  matched_name: Schema.String,
  per_100g: FoodNutrition,
  nutrition: FoodNutrition
}).annotations({ identifier: "NutritionItem" })
export type NutritionItem = typeof NutritionItem.Type

export const Unmatched = Schema.Struct({
  index: Schema.Int.annotations({ description: "The item's place in the request (for a text, the food's place among the foods read), from 0" }),
  query: Schema.String,
  text: Schema.optional(Schema.String.annotations({ description: "A meal in words: the words the food was read from" })),
  suggestions: Schema.Array(Schema.Struct({ fdc_id: Schema.String, name: Schema.String }))
}).annotations({ identifier: "Unmatched" })

export const NutritionResult = Schema.Struct({
  items: Schema.Array(NutritionItem),
  totals: FoodNutrition,
  total_grams: Amount,
  complete: Schema.Boolean.annotations({ description: "false when an item matched nothing (it is left out of the totals)" }),
  unmatched: Schema.Array(Unmatched),
  estimate: Schema.Literal(true),
  matcher_version: Schema.String
}).annotations({ identifier: "NutritionResult" })
export type NutritionResult = typeof NutritionResult.Type
