/**
 * Food search, lookups and nutrition for named foods, as every face serves them (REST, MCP): the one place their
 * arithmetic lives. The four of an analysis scale as an analysis item's do (analysis/portions.ts); the nine more
 * nutrients scale the same way and stay null when the record lacks them. A total is null when any item lacks it.
 */
import { Effect, Option } from "effect"
import { nutritionFor, roundGrams, roundNutrient, roundNutrition, sumGrams, sumNutrition } from "../analysis/portions.ts"
import { InvalidRequest, NotFound } from "../domain/errors.ts"
import { FoodDb } from "./FoodDb.ts"
import { type FoodPortion, type FoodRecord, MORE_NUTRIENTS, type MoreNutrients, UNKNOWN_NUTRIENTS } from "./records.ts"
import type { Food, FoodNutrition, NutritionItem, NutritionItemRequest, NutritionRequest, NutritionResult } from "./schemas.ts"

const moreOf = (record: FoodRecord): MoreNutrients => record.more ?? UNKNOWN_NUTRIENTS

const scaleMore = (more: MoreNutrients, grams: number): MoreNutrients => {
  const out: { -readonly [K in keyof MoreNutrients]: number | null } = { ...UNKNOWN_NUTRIENTS }
  for (const key of MORE_NUTRIENTS) {
    const v = more[key]
    out[key] = v === null ? null : roundNutrient((v * grams) / 100)
  }
  return out
}

const per100gOf = (record: FoodRecord): FoodNutrition => ({ ...roundNutrition(record.per100g), ...scaleMore(moreOf(record), 100) })

/** A record as the food endpoints answer it. */
export const foodOf = (record: FoodRecord): Food => ({
  fdc_id: record.sourceId,
  name: record.description,
  food_group: record.foodGroup,
  per_100g: per100gOf(record),
  portions: record.portions.map((p) => ({ amount: p.amount, unit: p.unit, grams: p.grams }))
})

const notFound = (fdcId: string) => new NotFound({ error: { code: "food_not_found", message: `no food has fdc_id ${JSON.stringify(fdcId)}; find one with GET /v1/foods?q=` } })

export const searchFoods = (text: string, limit: number) =>
  Effect.flatMap(FoodDb, (foods) => Effect.map(foods.search(text, limit), (records) => ({ foods: records.map(foodOf), matcher_version: foods.matcherVersion })))

export const lookupFood = (fdcId: string): Effect.Effect<Food, NotFound, FoodDb> =>
  Effect.flatMap(FoodDb, (foods) =>
    Effect.flatMap(foods.food(fdcId), Option.match({ onNone: () => Effect.fail(notFound(fdcId)), onSome: (r) => Effect.succeed(foodOf(r)) }))
  )

/** The first portion row whose unit is the given one, case-blind, on the whole unit or its first word. */
export const portionRow = (portions: ReadonlyArray<FoodPortion>, unit: string): FoodPortion | undefined => {
  const wanted = unit.trim().toLowerCase()
  const firstWord = (u: string) => u.trim().toLowerCase().split(/[\s,]+/)[0] ?? ""
  return portions.find((p) => p.unit.trim().toLowerCase() === wanted) ?? portions.find((p) => firstWord(p.unit) === wanted)
}

const unitRefused = (index: number, record: FoodRecord, unit: string) => {
  const units = [...new Set(record.portions.map((p) => p.unit))]
  const has = units.length === 0 ? "it has no household portions; send grams" : `its units: ${units.map((u) => JSON.stringify(u)).join(", ")}`
  return new InvalidRequest({
    error: {
      code: "invalid_request",
      message: `items.${index}.portion.unit: ${record.description} has no portion ${JSON.stringify(unit)}; ${has}`.slice(0, 300),
      issues: [{ path: ["items", index, "portion", "unit"], message: `no portion ${JSON.stringify(unit)}` }]
    }
  })
}

const itemOf = (index: number, request: NutritionItemRequest, record: FoodRecord): Effect.Effect<NutritionItem, InvalidRequest> => {
  let grams = request.grams
  let portion: NutritionItem["portion"]
  if (request.portion !== undefined) {
    const row = portionRow(record.portions, request.portion.unit)
    if (row === undefined || row.amount <= 0) return Effect.fail(unitRefused(index, record, request.portion.unit))
    grams = Math.max(0.01, roundGrams((request.portion.amount * row.grams) / row.amount))
    portion = { amount: request.portion.amount, unit: row.unit, grams }
  }
  const g = grams ?? 0
  const per100g = roundNutrition(record.per100g)
  return Effect.succeed({
    name: request.name ?? record.description,
    query: request.query ?? record.description,
    grams: g,
    ...(portion === undefined ? {} : { portion }),
    nutrition_source: "usda" as const,
    fdc_id: record.sourceId,
    matched_name: record.description,
    per_100g: per100gOf(record),
    nutrition: { ...nutritionFor(per100g, g), ...scaleMore(moreOf(record), g) }
  })
}

/** Totals of the matched items: the four add up as in an analysis; a more nutrient is null when any item lacks it. */
export const totalsOf = (items: ReadonlyArray<NutritionItem>): FoodNutrition => {
  const more: { -readonly [K in keyof MoreNutrients]: number | null } = { ...UNKNOWN_NUTRIENTS }
  for (const key of MORE_NUTRIENTS) {
    const values = items.map((i) => i.nutrition[key])
    more[key] = items.length === 0 || values.some((v) => v === null) ? null : roundNutrient(values.reduce<number>((a, v) => a + (v ?? 0), 0))
  }
  return { ...sumNutrition(items.map((i) => i.nutrition)), ...more }
}

const SUGGESTIONS = 5

/** The nearest foods for a text nothing matches: its search, else the search of its longest words one by one. */
const suggestionsFor = (text: string) =>
  Effect.gen(function* () {
    const foods = yield* FoodDb
    const whole = yield* foods.search(text, SUGGESTIONS)
    if (whole.length > 0) return whole
    const words = [...new Set(text.toLowerCase().match(/[\p{L}]{3,}/gu) ?? [])].sort((a, b) => b.length - a.length).slice(0, 4)
    for (const word of words) {
      const found = yield* foods.search(word, SUGGESTIONS)
      if (found.length > 0) return found
    }
    return []
  })

/** Nutrition of named foods: each item matched (by id or text) and priced; a text nothing matches is listed, never 0. */
export const nutritionOf = (request: NutritionRequest): Effect.Effect<NutritionResult, InvalidRequest | NotFound, FoodDb> =>
  Effect.gen(function* () {
    const foods = yield* FoodDb
    const items: Array<NutritionItem> = []
    const unmatched: Array<NutritionResult["unmatched"][number]> = []
    for (const [index, item] of request.items.entries()) {
      const record =
        item.fdc_id !== undefined
          ? Option.getOrUndefined(yield* foods.food(item.fdc_id))
          : Option.getOrUndefined(yield* foods.named(item.query ?? ""))
      if (record === undefined) {
        if (item.fdc_id !== undefined) return yield* Effect.fail(notFound(item.fdc_id))
        const near = yield* suggestionsFor(item.query ?? "")
        unmatched.push({ index, query: item.query ?? "", suggestions: near.map((r) => ({ fdc_id: r.sourceId, name: r.description })) })
        continue
      }
      items.push(yield* itemOf(index, item, record))
    }
    return {
      items,
      totals: totalsOf(items),
      total_grams: sumGrams(items.map((i) => i.grams)),
      complete: unmatched.length === 0,
      unmatched,
      estimate: true as const,
      matcher_version: foods.matcherVersion
    }
  })
