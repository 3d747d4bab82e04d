/**
 * What makes a record the plain, everyday one for a name typed without an estimate (search, nutrition in words):
 * a food-only part read once per record, and a part that depends on what the text asks for. The analysis matcher,
 * which has the model's estimate to judge by, does not use it.
 */
import type { StateWord } from "./text.ts"
import type { FoodRecord } from "./records.ts"
import { NOT_COOKING, RAWISH } from "./vocabulary.ts"
import type { IndexedFood, PreparedQuery } from "./shapes.ts"

/** Words USDA gives the ordinary kind of a food ("Crackers, standard snack-type", "Wheat flour, white, all-purpose"). */
const PLAIN = /\b(?:plain|all-purpose|original|standard|all commercial varieties|year round average|all types|all varieties|nfs)\b/

/** Another product made of the food, not the food: fermented, blended, puffed into cakes, dried and frozen. */
const PRODUCT_OF = /\b(?:fermented|blend|cakes?|dried-frozen|imitation|substitute|meatless|made with tofu|home-prepared with|filling|coated|coating)\b/

/** The description, in lower case, without its asides in brackets. */
const plainDescription = (record: FoodRecord) => record.description.toLowerCase().replace(/\([^)]*\)?/g, " ")

export const isProductOf = (record: FoodRecord) => PRODUCT_OF.test(plainDescription(record))

/** States a food is bought in rather than cooked at home ("Nuts, cashew nuts, dry roasted"); "cooked" alone is also SR28's "prepared". */
const SOLD_SO: ReadonlySet<StateWord> = new Set(["roasted", "toasted", "cooked"])

/** Cooking words of a description, "prepared" aside ("Mustard, prepared", "Tofu, hard, prepared with nigari"). */
export const COOKED = /\b(?:cooked|boiled|steamed|roasted|baked|broiled|grilled|stewed|braised|simmered|poached|scrambled|microwaved|heated)\b/

/** USDA lists more records of an everyday food (its forms, cuts and preparations): this much per doubling of them, at most 0.4. */
export const entriesScore = (entries: number) => Math.min(0.4, 0.1 * Math.log2(Math.max(1, entries)))

/** The food-only part: plain words, how many household measures USDA gives the record (everyday foods have many). */
export const everydayOf = (record: FoodRecord): number => {
  const description = plainDescription(record)
  let score = 0
  if (PLAIN.test(description)) score += 0.3
  if (PRODUCT_OF.test(description)) score -= 0.6
  score += 0.04 * Math.min(10, record.portions.length)
  return score
}

/** How far a record is the plain one for what the text asks: `everyday`, and no frying, freezing or cooking it did not ask for. */
export const everydayScore = (query: PreparedQuery, food: IndexedFood): number => {
  let score = food.everyday
  if (food.fried && !query.fried) score -= 0.5
  if (query.states.size > 0) return score
  if (food.states.has("frozen")) score -= 0.3
  let cooked = false
  let raw = false
  for (const s of food.states) {
    if (RAWISH.has(s)) raw = true
    else if (!NOT_COOKING.has(s) && !SOLD_SO.has(s)) cooked = true
  }
  // Foods eaten raw are meant raw ("kale"); a food SR28 lists cooked only by frying (tofu) is meant as it comes.
  if (!food.cookedByDefault && cooked && !raw) score -= 0.5
  if (food.cookedByDefault && raw && food.rawIsUsual) score += 0.6
  return score
}
