/** The answer to a nutrition call, for every face (REST, its lane, MCP): a meal in words, or named foods with their amounts. */
import { Effect } from "effect"
import type { InvalidRequest, NotFound } from "../../domain/errors.ts"
import { FoodDb } from "./FoodDb.ts"
import { namedFoodsNutritionOf, paceOf } from "./nutrition.ts"
import type { NutritionRequest, NutritionResult } from "./schemas.ts"
import { mealNutritionOf } from "./words/answer.ts"

/** A meal in words read and priced with the index of the moment the call began, each food in a turn of its own. */
const mealOf = (text: string): Effect.Effect<NutritionResult, InvalidRequest, FoodDb> =>
  Effect.gen(function* () {
    const foods = yield* FoodDb
    const read = yield* foods.reader
    return yield* mealNutritionOf(read, text, foods.matcherVersion, paceOf().turn)
  })

/** The body of POST /v1/nutrition (or MCP food_nutrition's arguments) answered: `text` or `items`, never both. */
export const nutritionOf = (request: NutritionRequest): Effect.Effect<NutritionResult, InvalidRequest | NotFound, FoodDb> =>
  request.text !== undefined ? mealOf(request.text) : namedFoodsNutritionOf(request)
