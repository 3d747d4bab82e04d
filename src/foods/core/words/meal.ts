/**
 * A meal in words priced food by food over one reading of the index: each food's record (the unit is evidence for it),
 * its grams and how they were found, or, when nothing fits, its words with suggestions of the same kind.
 */
import type { FoodRecord } from "../records.ts"
import { type GramsBasis, gramsOf, householdRow, type Priced } from "./grams.ts"
import { type ReadFood, readMeal } from "./read.ts"
import { SERVING_WORDS } from "./units.ts"

/** What the meal needs of the index: its records for a text, best first, trusted or merely near. */
export interface MealIndex {
  /** The records the matcher would trust for a text, best first (the first is the text's usual record). */
  readonly trusted: (text: string, limit: number) => ReadonlyArray<FoodRecord>
  readonly search: (text: string, limit: number) => ReadonlyArray<FoodRecord>
}

export type MealFood =
  | { readonly index: number; readonly food: ReadFood; readonly record: FoodRecord; readonly grams: number; readonly basis: GramsBasis; readonly portion?: Priced["portion"] }
  | { readonly index: number; readonly food: ReadFood; readonly suggestions: ReadonlyArray<FoodRecord> }

/** How many records of a text are looked through for one that has the unit named ("a slice of pizza"). */
const EVIDENCE_DEPTH = 25
const SUGGESTIONS = 5
/** Suggestion searches a call may make in all: a text of many unknown words costs no more than this. */
export const SUGGESTION_SEARCHES = 8

/**
 * Names people use for foods SR28 files under other words, or lacks: where their suggestions are looked for. A latte
 * is a milk coffee, sushi is rice and fish.
 */
const KIND_OF: ReadonlyArray<readonly [RegExp, string]> = [
  [/\b(?:lattes?|cappuccinos?|flat whites?|macchiatos?|cortados?|mochas?|frappuccinos?|caf[eé] au lait)\b/i, "coffee milk based"],
  [/\b(?:espressos?|americanos?|long blacks?)\b/i, "coffee brewed espresso"],
  [/\b(?:sushi|sashimi|maki|nigiri|onigiri)\b/i, "fish raw"],
  [/\b(?:boba|bubble tea|chai)\b/i, "tea"],
  [/\b(?:protein shakes?|protein bars?)\b/i, "protein"],
  [/\b(?:poke bowls?|poke)\b/i, "fish raw"],
  [/\b(?:ramen|pho|udon|soba)\b/i, "noodles soup"],
  [/\b(?:kombucha)\b/i, "tea"]
]

const suggestionsOf = (index: MealIndex, query: string, budget: { left: number }): ReadonlyArray<FoodRecord> => {
  const search = (text: string) => {
    if (budget.left <= 0) return []
    budget.left--
    return index.search(text, SUGGESTIONS)
  }
  const kind = KIND_OF.find(([pattern]) => pattern.test(query))
  if (kind !== undefined) {
    const found = search(kind[1])
    if (found.length > 0) return found
  }
  const whole = search(query)
  if (whole.length > 0) return whole
  // Else the longest words one by one ("zzz chicken" finds chicken), at most three of them.
  const words = [...new Set(query.toLowerCase().match(/[\p{L}]{3,}/gu) ?? [])].sort((a, b) => b.length - a.length).slice(0, 3)
  for (const word of words) {
    const found = search(word)
    if (found.length > 0) return found
  }
  return []
}

/**
 * Words of a record that is not the food as a person eats it when they name it plainly: frozen and unprepared fries, a
 * double cheeseburger, a cereal with marshmallows. Such a record gives way to the next that fits, unless the words ask.
 */
const NOT_AS_EATEN = /\b(?:unprepared|as purchased|dry mix|frozen|double|triple|marshmallows?)\b/gi

const asEaten = (record: FoodRecord, query: string) => {
  const asked = query.toLowerCase()
  for (const m of record.description.matchAll(NOT_AS_EATEN)) if (!asked.includes(m[0].toLowerCase().replace(/s$/, ""))) return false
  return true
}

/** How far down its records a food is looked for as eaten. */
const AS_EATEN_DEPTH = 8

/** The record for a food: with a household unit or container, the first record that fits the words and has it. */
const recordFor = (index: MealIndex, food: ReadFood): FoodRecord | undefined => {
  const unit = food.unit
  const wantsRow = unit !== undefined && (unit.kind === "household" || unit.kind === "container") && !SERVING_WORDS.has(unit.name)
  const candidates = index.trusted(food.query, wantsRow ? EVIDENCE_DEPTH : AS_EATEN_DEPTH)
  const eaten = candidates.filter((r) => asEaten(r, food.query))
  const usual = eaten[0] ?? candidates[0]
  if (!wantsRow) return usual
  return eaten.find((r) => householdRow(r.portions, unit.name) !== undefined) ?? candidates.find((r) => householdRow(r.portions, unit.name) !== undefined) ?? usual
}

/** A food read, priced: its record and grams, or its suggestions (the searches counted against `budget`). */
export const pricedFood = (index: MealIndex, food: ReadFood, i: number, budget: { left: number }): MealFood => {
  const record = recordFor(index, food)
  if (record !== undefined) {
    const grams = gramsOf(record, food)
    if (typeof grams !== "string") return { index: i, food, record, grams: grams.grams, basis: grams.basis, ...(grams.portion === undefined ? {} : { portion: grams.portion }) }
  }
  return { index: i, food, suggestions: suggestionsOf(index, food.query, budget) }
}

/** The foods of a text; stops reading after `max` + 1 foods (the caller refuses more). */
export const readFoods = (text: string, max: number): ReadonlyArray<ReadFood> => readMeal(text, max)

export interface MealRead {
  readonly foods: ReadonlyArray<ReadFood>
  readonly priced: ReadonlyArray<MealFood>
}

/** The foods of a text, each priced or unmatched, at once (tools and tests; the API prices them in turns). */
export const mealOf = (index: MealIndex, text: string, max: number): MealRead => {
  const foods = readFoods(text, max)
  if (foods.length > max) return { foods, priced: [] }
  const budget = { left: SUGGESTION_SEARCHES }
  return { foods, priced: foods.map((food, i) => pricedFood(index, food, i, budget)) }
}
