/**
 * Food search, lookups and nutrition for named foods, as every face serves them (REST, MCP): the one place their
 * arithmetic lives. The four of an analysis scale as an analysis item's do (analysis/portions.ts); the nine more
 * nutrients scale the same way and stay null when the record lacks them. A total is null when any item lacks it.
 */
import { Effect, Option } from "effect"
import { nutritionFor, roundGrams, roundNutrient, roundNutrition, sumGrams, sumNutrition } from "../analysis/portions.ts"
import { InvalidRequest, NotFound } from "../domain/errors.ts"
import { FoodDb, type FoodReader } from "./FoodDb.ts"
import type { Nutrition } from "../domain/schemas.ts"
import { type FoodPortion, type FoodRecord, type MoreNutrient, type MoreNutrients, UNKNOWN_NUTRIENTS } from "./records.ts"
import type { Food, FoodNutrition, NutritionItem, NutritionItemRequest, NutritionRequest, NutritionResult } from "./schemas.ts"
import { mealNutritionOf } from "./words/answer.ts"
import { spelledRow } from "./words/grams.ts"

const moreOf = (record: FoodRecord): MoreNutrients => record.more ?? UNKNOWN_NUTRIENTS

const scaled = (v: number | null, grams: number) => (v === null ? null : roundNutrient((v * grams) / 100))

// The nutrition objects below are written out as literals of one shape: built by spreading and keyed writes, each
// took 50–90 µs to make, most of a 20-item nutrition call.
const scaleMore = (more: MoreNutrients, grams: number): MoreNutrients => ({
  fiber_g: scaled(more.fiber_g, grams),
  sugars_g: scaled(more.sugars_g, grams),
  saturated_fat_g: scaled(more.saturated_fat_g, grams),
  sodium_mg: scaled(more.sodium_mg, grams),
  cholesterol_mg: scaled(more.cholesterol_mg, grams),
  potassium_mg: scaled(more.potassium_mg, grams),
  calcium_mg: scaled(more.calcium_mg, grams),
  iron_mg: scaled(more.iron_mg, grams),
  vitamin_c_mg: scaled(more.vitamin_c_mg, grams)
})

const withMore = (n: Nutrition, more: MoreNutrients): FoodNutrition => ({
  kcal: n.kcal,
  protein_g: n.protein_g,
  carbs_g: n.carbs_g,
  fat_g: n.fat_g,
  fiber_g: more.fiber_g,
  sugars_g: more.sugars_g,
  saturated_fat_g: more.saturated_fat_g,
  sodium_mg: more.sodium_mg,
  cholesterol_mg: more.cholesterol_mg,
  potassium_mg: more.potassium_mg,
  calcium_mg: more.calcium_mg,
  iron_mg: more.iron_mg,
  vitamin_c_mg: more.vitamin_c_mg
})

/** A record's per-100 g figures never change: made once per record. */
const per100gMade = new WeakMap<FoodRecord, FoodNutrition>()

const per100gOf = (record: FoodRecord): FoodNutrition => {
  let made = per100gMade.get(record)
  if (made === undefined) {
    made = withMore(roundNutrition(record.per100g), scaleMore(moreOf(record), 100))
    per100gMade.set(record, made)
  }
  return made
}

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

/**
 * The first portion row whose unit is the given one, case-blind, on the whole unit or its first word; else as the unit
 * is spelt otherwise ("tbsp" for "tablespoon", "slices" for "slice").
 */
export const portionRow = (portions: ReadonlyArray<FoodPortion>, unit: string): FoodPortion | undefined => {
  const wanted = unit.trim().toLowerCase()
  const firstWord = (u: string) => u.trim().toLowerCase().split(/[\s,]+/)[0] ?? ""
  return portions.find((p) => p.unit.trim().toLowerCase() === wanted) ?? portions.find((p) => firstWord(p.unit) === wanted) ?? spelledRow(portions, unit)
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

const itemOf = (index: number, request: NutritionItemRequest, record: FoodRecord): NutritionItem | InvalidRequest => {
  let grams = request.grams
  let portion: NutritionItem["portion"]
  if (request.portion !== undefined) {
    const row = portionRow(record.portions, request.portion.unit)
    if (row === undefined || row.amount <= 0) return unitRefused(index, record, request.portion.unit)
    grams = Math.max(0.01, roundGrams((request.portion.amount * row.grams) / row.amount))
    portion = { amount: request.portion.amount, unit: row.unit, grams }
  }
  return itemFor(record, grams ?? 0, { name: request.name ?? record.description, query: request.query ?? record.description }, portion)
}

/** A matched item of `grams` of a record; a meal in words adds the words it was read from and how its grams were found. */
export const itemFor = (
  record: FoodRecord,
  g: number,
  words: { readonly name: string; readonly query: string; readonly text?: string; readonly grams_basis?: NutritionItem["grams_basis"] },
  portion?: NutritionItem["portion"]
): NutritionItem => {
  const per100g = roundNutrition(record.per100g)
  return {
    name: words.name,
    query: words.query,
    ...(words.text === undefined ? {} : { text: words.text }),
    grams: g,
    ...(words.grams_basis === undefined ? {} : { grams_basis: words.grams_basis }),
    ...(portion === undefined ? {} : { portion }),
    nutrition_source: "usda" as const,
    fdc_id: record.sourceId,
    matched_name: record.description,
    per_100g: per100gOf(record),
    nutrition: withMore(nutritionFor(per100g, g), scaleMore(moreOf(record), g))
  }
}

/** Totals of the matched items: the four add up as in an analysis; a more nutrient is null when any item lacks it. */
export const totalsOf = (items: ReadonlyArray<NutritionItem>): FoodNutrition => {
  const total = (key: MoreNutrient): number | null => {
    if (items.length === 0) return null
    let sum = 0
    for (const item of items) {
      const v = item.nutrition[key]
      if (v === null) return null
      sum += v
    }
    return roundNutrient(sum)
  }
  const more: MoreNutrients = {
    fiber_g: total("fiber_g"),
    sugars_g: total("sugars_g"),
    saturated_fat_g: total("saturated_fat_g"),
    sodium_mg: total("sodium_mg"),
    cholesterol_mg: total("cholesterol_mg"),
    potassium_mg: total("potassium_mg"),
    calcium_mg: total("calcium_mg"),
    iron_mg: total("iron_mg"),
    vitamin_c_mg: total("vitamin_c_mg")
  }
  return withMore(sumNutrition(items.map((i) => i.nutrition)), more)
}

const SUGGESTIONS = 5

/** The nearest foods for a text nothing matches: its search, else the search of its longest words one by one. */
const suggestionsFor = (foods: FoodReader, text: string): ReadonlyArray<FoodRecord> => {
  const whole = foods.search(text, SUGGESTIONS)
  if (whole.length > 0) return whole
  const words = [...new Set(text.toLowerCase().match(/[\p{L}]{3,}/gu) ?? [])].sort((a, b) => b.length - a.length).slice(0, 4)
  for (const word of words) {
    const found = foods.search(word, SUGGESTIONS)
    if (found.length > 0) return found
  }
  return []
}

/** Nutrition of named foods: each item matched (by id or text) and priced; a text nothing matches is listed, never 0. */
export const nutritionOf = (request: NutritionRequest): Effect.Effect<NutritionResult, InvalidRequest | NotFound, FoodDb> =>
  Effect.gen(function* () {
    const foods = yield* FoodDb
    // The index is read once for every item: each is matched and priced at once, without an effect of its own.
    const read = yield* foods.reader
    if (request.text !== undefined) return yield* mealNutritionOf(read, request.text, foods.matcherVersion)
    const items: Array<NutritionItem> = []
    const unmatched: Array<NutritionResult["unmatched"][number]> = []
    for (const [index, item] of (request.items ?? []).entries()) {
      const record = item.fdc_id !== undefined ? read.food(item.fdc_id) : read.named(item.query ?? "")
      if (record === undefined) {
        if (item.fdc_id !== undefined) return yield* Effect.fail(notFound(item.fdc_id))
        const near = suggestionsFor(read, item.query ?? "")
        unmatched.push({ index, query: item.query ?? "", suggestions: near.map((r) => ({ fdc_id: r.sourceId, name: r.description })) })
        continue
      }
      const priced = itemOf(index, item, record)
      if (priced instanceof InvalidRequest) return yield* Effect.fail(priced)
      items.push(priced)
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
