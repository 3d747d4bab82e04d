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

/**
 * Everyday names said in USDA's words for a meal in words (the photo matcher is not changed): ranch is a dressing, a
 * diet coke a diet cola, a cheese stick string cheese, plain "cheese" cheddar, eggs over easy fried eggs.
 */
const SAID_AS: ReadonlyArray<readonly [RegExp, string]> = [
  [/^(?:half[\s-]*(?:and|&|'?n'?)[\s-]*half)$/i, "cream fluid half and half"],
  [/^ranch(?: dressing)?$/i, "salad dressing ranch dressing regular"],
  [/^(?:bbq|barbecue|barbeque) sauce$/i, "sauce barbecue"],
  [/^(?:diet|zero|coke zero|diet coke|diet pepsi|pepsi max)(?: coke| cola| soda| pop)?$/i, "carbonated cola low calorie sweetener"],
  [/^(?:(?:string )?cheese sticks?|string cheese)$/i, "cheese mozzarella low moisture part-skim"],
  [/^crackers?$/i, "crackers standard snack-type regular"],
  [/^cheese$/i, "cheese cheddar"],
  [/^(?:greek yogh?urt)$/i, "yogurt greek plain"],
  [/^(?:corn ?flakes)$/i, "kellogg's corn flakes"],
  [/^(?:oj|o\.j\.)$/i, "orange juice"],
  [/^(?:rolled |porridge )?oats$/i, "cereals oats regular and quick not fortified dry"],
  [/^(?:green beans|string beans)$/i, "beans snap green cooked boiled drained without salt"],
  [/^(?:green )?peas$/i, "peas green cooked boiled drained without salt"],
  [/^(?:sweet )?corn$/i, "corn sweet yellow cooked boiled drained without salt"],
  [/^(?:black |english breakfast |breakfast )?tea$/i, "tea black brewed prepared with tap water"],
  [/^(?:eggs? (?:over easy|over medium|over hard|sunny side up|sunny-side up))$/i, "egg fried"],
  [/^fries$/i, "french fries"],
  [/^(?:espressos?|shots? of espresso)$/i, "coffee brewed espresso restaurant-prepared"],
  [/^(?:(?:iced |hot |skinny |vanilla |caramel )?(?:lattes?|cappuccinos?|flat whites?|caf[eé] au lait))$/i, "coffee ready to drink milk based sweetened"],
  [/^(?:(?:milk |dark )?chocolate bars?|candy bars?)$/i, "candies milk chocolate"],
  [/^(?:dark chocolate)$/i, "chocolate dark 70-85% cacao solids"],
  [/^(?:(?:vanilla )?ice cream)$/i, "ice creams vanilla"]
]

/** A food's words as USDA would say them, for its record. */
const saidAs = (query: string) => SAID_AS.find(([pattern]) => pattern.test(query.trim()))?.[1] ?? query

/**
 * A dish of fillings USDA does not list, named more plainly: "turkey and swiss sandwich" is a turkey sandwich, and a
 * dish of one filling is the dish.
 */
const plainerDish = (query: string): string | undefined => {
  const m = /^(.*?)\s*\b(?:and|&|n)\s+(?:[\p{L}'-]+\s+){0,2}?((?:sandwich|sub|hoagie|bagel|biscuit|wrap|burrito|taco|quesadilla|salad|pizza|omelett?e|omelet|pie|soup|stew|croissant|panini|melt|burger|roll|muffin)(?:e?s)?)$/iu.exec(query)
  if (m !== null) return `${m[1]} ${m[2]}`
  const fillings = /^(?:[\p{L}'-]+\s+)+((?:sandwich|sub|hoagie|bagel|biscuit|wrap|burrito|croissant|panini|burger)(?:e?s)?)$/iu.exec(query)
  return fillings === null ? undefined : (fillings[1] ?? undefined)
}

/** A sandwich of sliced fillings ("ham sandwich", "turkey and swiss sub") is priced as USDA's submarine sandwich of them. */
const subOf = (index: MealIndex, query: string): FoodRecord | undefined => {
  const m = /^(.+?)\s+(?:sandwich(?:es)?|subs?|hoagies?)$/iu.exec(query)
  if (m === null || /\b(?:ice cream|cookies?|crackers?|grilled cheese|breakfast|chicken|fish|egg|peanut|pb|jelly|jam)\b/iu.test(query)) return undefined
  const filling = (m[1] ?? "").replace(/\b(?:and|&|n|swiss|cheddar|cheese|provolone|american|lettuce|tomato|mayo|mustard|[0-9]+|inch|footlong)\b/giu, " ").trim()
  const found = index.trusted(`submarine sandwich ${filling.length > 0 ? filling : "cold cut"}`, 3).find((r) => /submarine/i.test(r.description))
  return found ?? index.trusted("submarine sandwich cold cut", 3).find((r) => /submarine/i.test(r.description))
}

/** How far down its records a food is looked for as eaten. */
const AS_EATEN_DEPTH = 8

/** How many near records are looked through for one that has the unit the trusted ones lack. */
const NEAR_DEPTH = 10

/** Records after the first for a food whose first has no portion to price its words by, best first. */
const otherRecordsFor = (index: MealIndex, food: ReadFood, first: FoodRecord): ReadonlyArray<FoodRecord> => {
  const query = saidAs(food.query)
  // The next of the same words ("greek yogurt": its whole-milk record has no portion).
  const next = index.trusted(query, 4).filter((r) => r !== first && asEaten(r, query))
  // A unit none of them has ("2 slices of pepperoni pizza") is looked for among the near records that hold every word.
  const unit = food.unit
  if (unit === undefined || unit.kind !== "household") return next
  const words = query.toLowerCase().match(/[\p{L}]{3,}/gu) ?? []
  const near = index.search(query, NEAR_DEPTH).filter((r) => {
    const description = r.description.toLowerCase()
    return words.every((w) => description.includes(w.replace(/s$/, ""))) && householdRow(r.portions, unit.name) !== undefined
  })
  return [...next, ...near]
}

/** The record for a food: with a household unit or container, the first record that fits the words and has it. */
const recordFor = (index: MealIndex, food: ReadFood): FoodRecord | undefined => {
  const unit = food.unit
  const wantsRow = unit !== undefined && (unit.kind === "household" || unit.kind === "container") && !SERVING_WORDS.has(unit.name)
  const query = saidAs(food.query)
  const sub = subOf(index, query)
  if (sub !== undefined) return sub
  const candidates = index.trusted(query, wantsRow ? EVIDENCE_DEPTH : AS_EATEN_DEPTH)
  if (candidates.length === 0) {
    const plainer = plainerDish(query)
    if (plainer !== undefined) return recordFor(index, { ...food, query: plainer })
  }
  const eaten = candidates.filter((r) => asEaten(r, query))
  const usual = eaten[0] ?? candidates[0]
  if (!wantsRow) return usual
  return eaten.find((r) => householdRow(r.portions, unit.name) !== undefined) ?? candidates.find((r) => householdRow(r.portions, unit.name) !== undefined) ?? usual
}

/** A food read, priced: its record and grams, or its suggestions (the searches counted against `budget`). */
export const pricedFood = (index: MealIndex, food: ReadFood, i: number, budget: { left: number }): MealFood => {
  const first = recordFor(index, food)
  if (first !== undefined) {
    let grams = gramsOf(first, food)
    let record = first
    for (const other of typeof grams === "string" ? otherRecordsFor(index, food, first) : []) {
      grams = gramsOf(other, food)
      record = other
      if (typeof grams !== "string") break
    }
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
