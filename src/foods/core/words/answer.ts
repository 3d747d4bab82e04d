/**
 * The answer to a meal in words (POST /v1/nutrition with `text`): its foods read and priced as matched items, the
 * ones nothing fits listed with their words, and the refusals of a text too long or of too many foods.
 */
import { Effect } from "effect"
import { InvalidRequest } from "../../../domain/errors.ts"
import type { FoodReader } from "../FoodDb.ts"
import { itemFor, nutritionResult } from "../nutrition.ts"
import { NUTRITION_TEXT_FOODS_MAX, type NutritionItem, type NutritionResult } from "../schemas.ts"
import { type MealFood, type MealIndex, pricedFood, readFoods, SUGGESTION_SEARCHES } from "./meal.ts"

const tooManyFoods = () =>
  new InvalidRequest({
    error: {
      code: "invalid_request",
      message: `text: at most ${NUTRITION_TEXT_FOODS_MAX} foods; send the meal in parts`,
      issues: [{ path: ["text"], message: `at most ${NUTRITION_TEXT_FOODS_MAX} foods` }]
    }
  })

/** A food read and priced as the answer shows it. */
const itemOf = (food: Extract<MealFood, { readonly record: unknown }>): NutritionItem =>
  itemFor(food.record, food.grams, { name: food.record.description, query: food.food.query, text: food.food.text, grams_basis: food.basis }, food.portion)

/**
 * The nutrition of a meal in words. `turn` is taken before each food (it lets the event loop run when the call has
 * held it for a while): a food's first reading can take milliseconds, and twenty of them must not hold the loop at once.
 */
export const mealNutritionOf = (read: FoodReader, text: string, matcherVersion: string, turn: Effect.Effect<void>): Effect.Effect<NutritionResult, InvalidRequest> =>
  Effect.gen(function* () {
    const foods = readFoods(text, NUTRITION_TEXT_FOODS_MAX)
    if (foods.length > NUTRITION_TEXT_FOODS_MAX) return yield* Effect.fail(tooManyFoods())
    const index: MealIndex = { trusted: read.trusted, search: read.search }
    const budget = { left: SUGGESTION_SEARCHES }
    const items: Array<NutritionItem> = []
    const unmatched: Array<NutritionResult["unmatched"][number]> = []
    for (const [i, food] of foods.entries()) {
      yield* turn
      const priced = pricedFood(index, food, i, budget)
      if ("record" in priced) items.push(itemOf(priced))
      else
        unmatched.push({
          index: i,
          query: food.query,
          text: food.text,
          suggestions: priced.suggestions.map((r) => ({ fdc_id: r.sourceId, name: r.description }))
        })
    }
    return yield* nutritionResult(items, unmatched, matcherVersion)
  })
