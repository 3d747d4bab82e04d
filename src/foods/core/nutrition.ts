/**
 * Food search, lookups and nutrition for named foods, as every face serves them (REST, MCP): the one place their
 * arithmetic lives. `per_100g` is the record's own figures; an item's nutrition is per_100g × grams ÷ 100 and a total
 * the sum of the items' figures, each to at most two decimals, so a caller can redo the sums from the answer. A more
 * nutrient stays null when the record lacks it, and a total is null when any item lacks it.
 */
import { Effect, Option } from "effect"
import { hundredths, roundGrams, sumGrams } from "./arithmetic.ts"
import { InvalidRequest, NotFound } from "../../domain/errors.ts"
import { FoodDb, type FoodReader } from "./FoodDb.ts"
import { type FoodPortion, type FoodRecord, type MoreNutrient, type MoreNutrients, UNKNOWN_NUTRIENTS } from "./records.ts"
import { type Food, type FoodNutrition, GRAMS_MAX, GRAMS_MIN, type NutritionItem, type NutritionItemRequest, type NutritionRequest, type NutritionResult } from "./schemas.ts"
import { spelledRow } from "./words/grams.ts"

const moreOf = (record: FoodRecord): MoreNutrients => record.more ?? UNKNOWN_NUTRIENTS

const scaled = (v: number, grams: number) => hundredths((v * grams) / 100)
const scaledOrNull = (v: number | null, grams: number) => (v === null ? null : scaled(v, grams))

// The nutrition objects below are written out as literals of one shape: built by spreading and keyed writes, each
// took 50–90 µs to make, most of a 20-item nutrition call.
/** Nutrition of `grams` of a food, every figure from the per_100g the answer shows. */
const scaleAll = (per100g: FoodNutrition, grams: number): FoodNutrition => ({
  kcal: scaled(per100g.kcal, grams),
  protein_g: scaled(per100g.protein_g, grams),
  carbs_g: scaled(per100g.carbs_g, grams),
  fat_g: scaled(per100g.fat_g, grams),
  fiber_g: scaledOrNull(per100g.fiber_g, grams),
  sugars_g: scaledOrNull(per100g.sugars_g, grams),
  saturated_fat_g: scaledOrNull(per100g.saturated_fat_g, grams),
  sodium_mg: scaledOrNull(per100g.sodium_mg, grams),
  cholesterol_mg: scaledOrNull(per100g.cholesterol_mg, grams),
  potassium_mg: scaledOrNull(per100g.potassium_mg, grams),
  calcium_mg: scaledOrNull(per100g.calcium_mg, grams),
  iron_mg: scaledOrNull(per100g.iron_mg, grams),
  vitamin_c_mg: scaledOrNull(per100g.vitamin_c_mg, grams)
})

/** A record's per-100 g figures as it has them: made once per record. */
const per100gMade = new WeakMap<FoodRecord, FoodNutrition>()

const per100gOf = (record: FoodRecord): FoodNutrition => {
  let made = per100gMade.get(record)
  if (made === undefined) {
    const n = record.per100g
    const more = moreOf(record)
    made = {
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
    }
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

/** A portion whose grams fall outside the bound of `grams` (a huge or tiny amount) is refused like grams would be. */
const portionOutOfBounds = (index: number, portion: { readonly amount: number; readonly unit: string }, row: FoodPortion) =>
  new InvalidRequest({
    error: {
      code: "invalid_request",
      message: `items.${index}.portion.amount: ${portion.amount} × ${JSON.stringify(row.unit)} must weigh from ${GRAMS_MIN} to ${GRAMS_MAX} g (one is ${row.grams / row.amount} g)`.slice(0, 300),
      issues: [{ path: ["items", index, "portion", "amount"], message: `a portion of ${GRAMS_MIN} to ${GRAMS_MAX} g` }]
    }
  })

const itemOf = (index: number, request: NutritionItemRequest, record: FoodRecord): NutritionItem | InvalidRequest => {
  let grams = request.grams ?? 0
  let portion: NutritionItem["portion"]
  if (request.portion !== undefined) {
    const row = portionRow(record.portions, request.portion.unit)
    if (row === undefined || !(row.amount > 0)) return unitRefused(index, record, request.portion.unit)
    grams = roundGrams((request.portion.amount * row.grams) / row.amount)
    // `!(…)` refuses NaN and Infinity as well as grams out of the bound.
    if (!(grams >= GRAMS_MIN && grams <= GRAMS_MAX)) return portionOutOfBounds(index, request.portion, row)
    portion = { amount: request.portion.amount, unit: row.unit, grams }
  }
  return itemFor(record, grams, { name: request.name ?? record.description, query: request.query ?? record.description }, portion)
}

/** A matched item of `grams` of a record; a meal in words adds the words it was read from and how its grams were found. */
export const itemFor = (
  record: FoodRecord,
  grams: number,
  words: { readonly name: string; readonly query: string; readonly text?: string; readonly grams_basis?: NutritionItem["grams_basis"] },
  portion?: NutritionItem["portion"]
): NutritionItem => {
  const per100g = per100gOf(record)
  return {
    name: words.name,
    query: words.query,
    ...(words.text === undefined ? {} : { text: words.text }),
    grams,
    ...(words.grams_basis === undefined ? {} : { grams_basis: words.grams_basis }),
    ...(portion === undefined ? {} : { portion }),
    nutrition_source: "usda" as const,
    fdc_id: record.sourceId,
    matched_name: record.description,
    per_100g: per100g,
    nutrition: scaleAll(per100g, grams)
  }
}

/** Totals of the matched items: the sum of their figures, to hundredths; a nutrient is null when any item lacks it. */
export const totalsOf = (items: ReadonlyArray<NutritionItem>): FoodNutrition => {
  const sum = (key: "kcal" | "protein_g" | "carbs_g" | "fat_g"): number => {
    let total = 0
    for (const item of items) total += item.nutrition[key]
    return hundredths(total)
  }
  const total = (key: MoreNutrient): number | null => {
    if (items.length === 0) return null
    let all = 0
    for (const item of items) {
      const v = item.nutrition[key]
      if (v === null) return null
      all += v
    }
    return hundredths(all)
  }
  return {
    kcal: sum("kcal"),
    protein_g: sum("protein_g"),
    carbs_g: sum("carbs_g"),
    fat_g: sum("fat_g"),
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
}

const SUGGESTIONS = 5
/** The searches one call may make for suggestions (two for each of 20 items): past them, an unmatched text has none. */
const SUGGESTION_SEARCHES = 40
/** How long a call computes at a stretch before the event loop gets its turn (other requests, /health). */
const SLICE_MS = 5

/** A call's pace: the suggestion searches it has left, and when it last let the event loop run. */
export const paceOf = () => {
  let searches = SUGGESTION_SEARCHES
  let since = performance.now()
  const breathe = Effect.async<void>((resume) => {
    const turn = setImmediate(() => resume(Effect.void))
    return Effect.sync(() => clearImmediate(turn))
  })
  return {
    /** Takes one search from the call's allowance, or says none is left. */
    search: () => searches-- > 0,
    /** Lets the event loop run when the call has held it for a slice. */
    turn: Effect.suspend(() => {
      if (performance.now() - since < SLICE_MS) return Effect.void
      return Effect.tap(breathe, () => {
        since = performance.now()
      })
    })
  }
}

/** The nearest foods for a text nothing matches: its search, else the search of its longest words one by one. */
const suggestionsFor = (foods: FoodReader, text: string, pace: ReturnType<typeof paceOf>) =>
  Effect.gen(function* () {
    if (!pace.search()) return []
    yield* pace.turn
    const whole = foods.search(text, SUGGESTIONS)
    if (whole.length > 0) return whole
    const words = [...new Set(text.toLowerCase().match(/[\p{L}]{3,}/gu) ?? [])].sort((a, b) => b.length - a.length).slice(0, 4)
    for (const word of words) {
      if (!pace.search()) return []
      yield* pace.turn
      const found = foods.search(word, SUGGESTIONS)
      if (found.length > 0) return found
    }
    return []
  })

/** Nutrition of named foods: each item matched (by id or text) and priced; a text nothing matches is listed, never 0. */
export const namedFoodsNutritionOf = (request: NutritionRequest): Effect.Effect<NutritionResult, InvalidRequest | NotFound, FoodDb> =>
  Effect.gen(function* () {
    const foods = yield* FoodDb
    // One index for every item of the call, the one of the moment when it began.
    const read = yield* foods.reader
    const pace = paceOf()
    const items: Array<NutritionItem> = []
    const unmatched: Array<NutritionResult["unmatched"][number]> = []
    for (const [index, item] of (request.items ?? []).entries()) {
      yield* pace.turn
      const record = item.fdc_id !== undefined ? read.food(item.fdc_id) : read.named(item.query ?? "")
      if (record === undefined) {
        if (item.fdc_id !== undefined) return yield* Effect.fail(notFound(item.fdc_id))
        const near = yield* suggestionsFor(read, item.query ?? "", pace)
        unmatched.push({ index, query: item.query ?? "", suggestions: near.map((r) => ({ fdc_id: r.sourceId, name: r.description })) })
        continue
      }
      const priced = itemOf(index, item, record)
      if (priced instanceof InvalidRequest) return yield* Effect.fail(priced)
      items.push(priced)
    }
    return yield* nutritionResult(items, unmatched, foods.matcherVersion)
  })

/**
 * The answer of a nutrition call (named foods or a meal in words): its priced items, their totals and the foods it
 * could not price. Answers are sent without the schema's walk: a figure JSON cannot hold (it would go out as null)
 * stops here.
 */
export const nutritionResult = (
  items: ReadonlyArray<NutritionItem>,
  unmatched: NutritionResult["unmatched"],
  matcherVersion: string
): Effect.Effect<NutritionResult> => {
  const result: NutritionResult = {
    items,
    totals: totalsOf(items),
    total_grams: sumGrams(items.map((i) => i.grams)),
    complete: unmatched.length === 0,
    unmatched,
    estimate: true as const,
    matcher_version: matcherVersion
  }
  return allFinite(result) ? Effect.succeed(result) : Effect.dieMessage("a nutrition answer holds a figure that is not a finite number")
}

const finiteOrNull = (v: number | null) => v === null || Number.isFinite(v)

const finiteNutrition = (n: FoodNutrition) =>
  Number.isFinite(n.kcal) &&
  Number.isFinite(n.protein_g) &&
  Number.isFinite(n.carbs_g) &&
  Number.isFinite(n.fat_g) &&
  finiteOrNull(n.fiber_g) &&
  finiteOrNull(n.sugars_g) &&
  finiteOrNull(n.saturated_fat_g) &&
  finiteOrNull(n.sodium_mg) &&
  finiteOrNull(n.cholesterol_mg) &&
  finiteOrNull(n.potassium_mg) &&
  finiteOrNull(n.calcium_mg) &&
  finiteOrNull(n.iron_mg) &&
  finiteOrNull(n.vitamin_c_mg)

/** Whether every figure of a nutrition answer is a finite number, as its schema requires. */
const allFinite = (result: NutritionResult): boolean =>
  Number.isFinite(result.total_grams) &&
  finiteNutrition(result.totals) &&
  result.items.every((i) => Number.isFinite(i.grams) && finiteNutrition(i.per_100g) && finiteNutrition(i.nutrition) && (i.portion === undefined || (Number.isFinite(i.portion.amount) && Number.isFinite(i.portion.grams))))
