/**
 * The two free MCP tools beside `analyze_food`: `search_foods` and `food_nutrition` (CONTRACT "Foods and nutrition").
 * The same answers, refusals and budget as GET /v1/foods and POST /v1/nutrition; read-only, no model call, nothing charged.
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/server"
import { Effect, Either, Schema } from "effect"
import type { KeyFingerprints } from "../../credits/keys.ts"
import type { Ledger } from "../../credits/Ledger.ts"
import type { InvalidRequest } from "../../domain/errors.ts"
import { jsonSchemaOf } from "../../domain/schemas.ts"
import type { FoodLimits } from "../../limits/FoodLimits.ts"
import { type ArgumentBounds, decodeArguments, ICONS } from "../../mcp/tool.ts"
import { admitFoodCall } from "./caller.ts"
import type { FoodDb } from "../core/FoodDb.ts"
import { searchFoods } from "../core/nutrition.ts"
import { nutritionOf } from "../core/nutritionAnswer.ts"
import { FoodList, NUTRITION_ITEMS_MAX, NutritionRequest, NutritionResult, SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX, SEARCH_TEXT_MAX } from "../core/schemas.ts"

export const SEARCH_TOOL = "search_foods"
export const NUTRITION_TOOL = "food_nutrition"
export const FOOD_TOOLS: ReadonlyArray<string> = [SEARCH_TOOL, NUTRITION_TOOL]

const SearchInput = Schema.Struct({
  query: Schema.String.pipe(
    Schema.minLength(1, { message: () => "a food text of 1 to 200 characters is required" }),
    Schema.maxLength(SEARCH_TEXT_MAX, { message: () => "at most 200 characters" })
  ).annotations({ description: "English food text, 1–200 characters, e.g. \"tofu\" or \"roasted potatoes\"" }),
  limit: Schema.optional(
    Schema.Int.pipe(Schema.between(1, SEARCH_LIMIT_MAX, { message: () => "a whole number from 1 to 25" })).annotations({
      description: "How many foods, 1–25 (default 10)"
    })
  )
}).annotations({ parseOptions: { onExcessProperty: "error" } })

/** A refused call: the REST error body without its `_tag`, plus REST's Retry-After on 429 and 503. */
const FoodToolError = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String.annotations({ description: "The same error.code the REST API answers" }),
    message: Schema.String,
    issues: Schema.optional(
      Schema.Array(Schema.Struct({ path: Schema.Array(Schema.Union(Schema.String, Schema.Number)), message: Schema.String }))
    )
  }),
  retry_after_seconds: Schema.optional(Schema.Int.annotations({ description: "rate_limited: wait at least this long before retrying" }))
}).annotations({ identifier: "FoodToolError" })

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const
/** MCP Apps: the model calls them, and so does analyze_food's card (its corrections) through the host; written out, as not every host assumes this default. */
const FOR_MODEL_AND_APP = { ui: { visibility: ["model", "app"] } }
const FREE =
  "Free: no payment and no key needed (a Bearer key on the connection, if sent, must be valid: invalid_key). No model call, nothing charged; LIMIT_FOODS_PER_MINUTE calls per client address and per key, shared with the REST food paths (rate_limited with retry_after_seconds). Errors have isError true and structuredContent { error: { code, message } } with the REST API's codes."

/** The output schemas name the error shape too: the official client validates structuredContent of error results. */
const schemaOf = (schema: Schema.Schema.AnyNoContext, inline: boolean) => ({ ...jsonSchemaOf(schema, { inline }), type: "object" as const })

export const foodToolDefinitions: ReadonlyArray<Tool> = [
  {
    name: SEARCH_TOOL,
    title: "Search foods",
    icons: ICONS,
    description: [
      "Find foods in the local USDA SR28 database for a text, best first (the plain, everyday record ranks first: \"tofu\" is a plain tofu).",
      "Each food: fdc_id, name, food group, per-100 g nutrition (kcal, protein, carbohydrate, fat and nine more nutrients, null where the record lacks them) and household portions (\"1 cup, chopped = 160 g\").",
      "Use it to swap a food of an analysis or to find an fdc_id for food_nutrition. An empty list when nothing fits.",
      FREE
    ].join(" "),
    inputSchema: schemaOf(SearchInput, true),
    outputSchema: schemaOf(Schema.Union(FoodList, FoodToolError), false),
    annotations: { title: "Search foods", ...READ_ONLY },
    _meta: FOR_MODEL_AND_APP
  },
  {
    name: NUTRITION_TOOL,
    title: "Nutrition of named foods",
    icons: ICONS,
    description: [
      "Nutrition of a meal, per food and in total. Send exactly one of text or items.",
      "text: the user's own words about what they ate, passed as they are (do not split, convert or estimate them yourself), e.g. \"2 eggs, a slice of toast with butter and a latte\"; at most 2,000 characters and 20 foods. Each food read comes back with text (its words), grams and grams_basis: stated (a weight or measuring unit), portion (a household word, container or count) or typical (no amount given: one typical serving; ask the user if it matters).",
      "items: 1–20 named foods, each exactly one of query (English food text) or fdc_id, and exactly one of grams (0.01–5000) or portion { amount, unit } (a unit of that food's portions, e.g. 2 \"large\" eggs; \"tbsp\" and \"tablespoon\" alike). Use items to correct an analysis (send its items back with changed grams or foods).",
      "A food nothing matches is never counted as zero: it is listed in unmatched (with its text for a meal in words) and suggestions, and complete is false; offer the suggestions, then send items with the chosen fdc_id. An unknown fdc_id is food_not_found; an item's unit the food lacks is invalid_request naming the units it has.",
      FREE
    ].join(" "),
    inputSchema: schemaOf(NutritionRequest, true),
    outputSchema: schemaOf(Schema.Union(NutritionResult, FoodToolError), false),
    annotations: { title: "Nutrition of named foods", ...READ_ONLY },
    _meta: FOR_MODEL_AND_APP
  }
]

/**
 * Arguments past these are refused before any element is decoded, as REST refuses a body: more than 20 items by their
 * count, anything larger than the nutrition lane reads (20 items of 200-character names fit in a tenth of it) by a
 * walk that stops as soon as it is over. 900,000 empty items in 2.7 MB are refused as fast as 21.
 */
const ARGUMENTS_CHARS = 64 * 1024
const NUTRITION_BOUNDS: ArgumentBounds = { maxChars: ARGUMENTS_CHARS, arrays: [{ key: "items", max: NUTRITION_ITEMS_MAX, message: "at most 20 items" }] }
const SEARCH_BOUNDS: ArgumentBounds = { maxChars: ARGUMENTS_CHARS }

const text = (value: unknown) => ({ type: "text" as const, text: JSON.stringify(value) })

const success = (value: object): CallToolResult => ({ content: [text(value)], structuredContent: { ...value } })

interface Refusal {
  readonly error: { readonly code: string; readonly message: string }
  readonly retryAfterSeconds?: number | undefined
}

const refused = (failure: Refusal): CallToolResult => {
  const body = {
    error: failure.error,
    ...(failure.retryAfterSeconds === undefined ? {} : { retry_after_seconds: failure.retryAfterSeconds })
  }
  return { isError: true, content: [text(body)], structuredContent: body }
}

/**
 * One call of a food tool from `address` with the connection's Authorization header: arguments first (invalid_request),
 * then the key and the budget (invalid_key, rate_limited), then the answer; every refusal is a tool error.
 */
export const callFoodTool = (
  name: string,
  args: unknown,
  address: string,
  authorization: string | undefined
): Effect.Effect<CallToolResult, never, FoodDb | FoodLimits | KeyFingerprints | Ledger> => {
  const run = <A extends object, E extends Refusal, R>(input: Either.Either<A, InvalidRequest>, answer: (a: A) => Effect.Effect<object, E, R>) =>
    Either.isLeft(input)
      ? Effect.succeed(refused(input.left))
      : Effect.zipRight(admitFoodCall(address, authorization), answer(input.right)).pipe(Effect.match({ onFailure: refused, onSuccess: success }))
  return name === SEARCH_TOOL
    ? run(decodeArguments(SearchInput, args, SEARCH_BOUNDS), (input) => searchFoods(input.query, input.limit ?? SEARCH_LIMIT_DEFAULT))
    : run(decodeArguments(NutritionRequest, args, NUTRITION_BOUNDS), nutritionOf)
}
