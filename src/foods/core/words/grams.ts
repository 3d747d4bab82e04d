/**
 * The grams of a food read from words, from its record's own portions: a weight as stated, a measuring volume through
 * the food's own volume portion (else 1 g per ml), a container as a volume, a household word as that portion, a count
 * as that many pieces, and no amount as one typical serving.
 */
import type { FoodPortion, FoodRecord } from "../records.ts"
import type { ReadFood } from "./read.ts"
import { CUP_ML, FL_OZ_ML, measureOf, SERVING_WORDS, SIZES, singular, TBSP_ML, TSP_ML, type Unit } from "./units.ts"

export type GramsBasis = "stated" | "portion" | "typical"

export interface Priced {
  readonly grams: number
  readonly basis: GramsBasis
  /** The portion the grams came from, as used. */
  readonly portion?: { readonly amount: number; readonly unit: string; readonly grams: number }
}

/** The words of a portion's unit before any bracket, in the singular: "slice, large" → ["slice", "large"]. */
const unitWords = (p: FoodPortion): ReadonlyArray<string> => {
  let made = wordsMade.get(p)
  if (made === undefined) {
    made = p.unit
      .toLowerCase()
      .replace(/\([^)]*\)?/g, " ")
      .split(/[^\p{L}]+/u)
      .filter((w) => w.length > 0)
      .map(singular)
    wordsMade.set(p, made)
  }
  return made
}

/** A portion's words never change: read once per portion. */
const wordsMade = new WeakMap<FoodPortion, ReadonlyArray<string>>()

const firstWord = (p: FoodPortion) => unitWords(p)[0] ?? ""

const usable = (p: FoodPortion) => p.amount > 0 && p.grams > 0

/** Household words that name the same portion where a food lacks the word itself: bacon comes in slices, not strips. */
const SAME_PORTION: ReadonlyMap<string, ReadonlyArray<string>> = new Map([
  ["strip", ["slice", "piece"]],
  ["rasher", ["slice", "strip"]],
  ["slice", ["piece", "wedge"]],
  ["wedge", ["slice", "piece"]],
  ["scoop", ["serving"]],
  ["square", ["piece"]],
  ["piece", ["slice", "item", "each"]],
  ["pc", ["piece", "slice"]],
  ["filet", ["fillet"]],
  ["fillet", ["piece"]],
  ["patty", ["burger"]],
  ["sausage", ["link"]],
  ["link", ["sausage"]],
  ["bar", ["item", "piece"]]
])

/** The food's portion named by a household word (or one that names the same portion), or undefined. */
export const householdRow = (portions: ReadonlyArray<FoodPortion>, word: string): FoodPortion | undefined => {
  const wanted = singular(word.toLowerCase())
  const own = rowNamed(portions, wanted)
  if (own !== undefined) return own
  for (const other of SAME_PORTION.get(wanted) ?? []) {
    const row = rowNamed(portions, other)
    if (row !== undefined) return row
  }
  return undefined
}

/** On the whole unit, then on the unit's only word, its first word, and any of its words ("drink, large"). */
const rowNamed = (portions: ReadonlyArray<FoodPortion>, wanted: string, anyWord = true): FoodPortion | undefined => {
  const size = SIZES.get(wanted) ?? wanted
  return (
    portions.find((p) => usable(p) && p.unit.toLowerCase().trim() === size) ??
    portions.find((p) => usable(p) && unitWords(p).length === 1 && unitWords(p)[0] === wanted) ??
    portions.find((p) => usable(p) && firstWord(p) === wanted) ??
    (anyWord ? portions.find((p) => usable(p) && !/\bper\b/i.test(p.unit) && unitWords(p).includes(wanted)) : undefined)
  )
}

/** ml in one of a portion's measuring units, or undefined when its unit is no measuring volume. */
const VOLUME_ROWS: ReadonlyArray<readonly [RegExp, number]> = [
  [/^cups?\b/, CUP_ML],
  [/^(?:tbsp|tablespoons?)\b/, TBSP_ML],
  [/^(?:tsp|teaspoons?)\b/, TSP_ML],
  [/^fl\.? ?oz\b/, FL_OZ_ML],
  [/^quarts?\b/, 946.4],
  [/^pints?\b/, 473.2],
  [/^ml\b/, 1],
  [/^liters?\b/, 1000]
]

const mlOfRow = (p: FoodPortion): number | undefined => {
  const unit = p.unit.toLowerCase().trim()
  for (const [pattern, ml] of VOLUME_ROWS) if (pattern.test(unit)) return ml
  return undefined
}

/** Grams per ml of the food, from its first volume portion, or undefined when it has none. */
const densityOf = (portions: ReadonlyArray<FoodPortion>): { readonly perMl: number; readonly row: FoodPortion } | undefined => {
  for (const p of portions) {
    const ml = mlOfRow(p)
    if (ml !== undefined && usable(p)) return { perMl: p.grams / (p.amount * ml), row: p }
  }
  return undefined
}

const round2 = (n: number) => Math.round(n * 100) / 100

/** The most one piece of a food can weigh: a large sandwich or steak, not a whole roast, bird or melon. */
const PIECE_MAX_GRAMS = 450

/** A piece lighter than this (a grape, a strawberry, a baby carrot) is eaten by the cup, not one at a time. */
const TINY_PIECE_GRAMS = 15

/** Rows that name one piece of a food, best first: medium where it has one, then the food's own word, then pieces. */
const PIECE_WORDS = ["medium", "piece", "item", "each", "whole", "fruit", "link", "patty", "large", "small", "slice", "sandwich", "bar", "roll", "unit", "container"]

/** One piece of the food: medium, its own name ("breast" for a chicken breast), a piece, …; undefined when it has none. */
export const pieceRow = (record: FoodRecord, query: string): FoodPortion | undefined => {
  // A whole pineapple, melon, roast or bird is no piece one eats.
  const portions = record.portions.filter((p) => usable(p) && p.grams / p.amount <= PIECE_MAX_GRAMS)
  const medium = portions.find((p) => firstWord(p) === "medium")
  if (medium !== undefined) return medium
  const own = query.toLowerCase().match(/[\p{L}]+/gu)?.map(singular) ?? []
  const head = own.at(-1)
  const pieces = portions.filter((p) => !/\bper\b|\bcup\b/i.test(p.unit))
  for (const word of head === undefined ? PIECE_WORDS : [head, ...PIECE_WORDS]) {
    const row = rowNamed(pieces, word, false)
    if (row !== undefined) return row
  }
  return undefined
}

/** Foods eaten by the spoonful: their typical serving is a pat, a tablespoon or a teaspoon, never a cup. */
const SPOONED =
  /^(?:butter|margarine|sugars?|honey|syrups?|jams|jellies|marmalade|catsup|mustard|mayonnaise|sauce|salad dressing|sweeteners?|cream|creamer|cream cheese|peanut butter|nut butter|almond butter|oil|shortening|lard|salt|spices|pepper|vinegar|dip|hummus|salsa|relish|gravy|frosting|whipped|toppings?)\b/i

const SPOON_ROWS = ["pat", "dash", "tbsp", "tablespoon", "tsp", "teaspoon", "packet"]

/** Rows that are no serving: a bare weight, a package or box of many servings. */
const notAServing = (p: FoodPortion) => /^(?:oz|ounce|lb|pound|g|gram|kg|fl\.? ?oz|package|box|container|bag|jar|loaf|pie|cake|quart|gallon|pint|recipe|batch|tub|carton|nlea)\b/i.test(p.unit.trim()) || /\bper\b/i.test(p.unit)

/** One typical serving: a spoonful of what is eaten by the spoon, one piece of what is eaten whole, else the first household portion. */
export const typicalRow = (record: FoodRecord, query: string): FoodPortion | undefined => {
  const portions = record.portions.filter(usable)
  const description = record.description.replace(/^[^,]*\b(?:foods?|beverages),\s*/i, "")
  if (SPOONED.test(description) || record.foodGroup === "Fats and Oils" || record.foodGroup === "Spices and Herbs") {
    for (const word of SPOON_ROWS) {
      const row = portions.find((p) => firstWord(p) === word)
      if (row !== undefined) return row
    }
  }
  const piece = pieceRow(record, query)
  if (piece !== undefined && piece.grams / piece.amount < TINY_PIECE_GRAMS) {
    const cup = portions.find((p) => firstWord(p) === "cup" || firstWord(p) === "nlea")
    if (cup !== undefined) return cup
  }
  return piece ?? portions.find((p) => !notAServing(p) && p.grams / p.amount <= PIECE_MAX_GRAMS) ?? portions.find((p) => !/\bper\b/i.test(p.unit)) ?? portions[0]
}

const fromRow = (row: FoodPortion, amount: number, basis: GramsBasis, unit = row.unit): Priced => {
  const grams = Math.max(0.01, round2((amount * row.grams) / row.amount))
  return { grams, basis, portion: { amount, unit, grams } }
}

/** Containers sold in one-serving and family sizes: the one a person eats is the serving. */
const SINGLE_SERVE: ReadonlySet<string> = new Set(["bag", "packet", "pack", "package", "box", "pouch", "sachet"])
const SINGLE_SERVE_MAX_GRAMS = 100

/** Amounts beyond this many grams are not a meal's (the items path's bound too). */
export const GRAMS_MAX = 5000

/**
 * The grams of a food read from words with the record chosen for it, or a sentence saying why the record cannot take
 * the unit.
 */
export const gramsOf = (record: FoodRecord, food: ReadFood): Priced | string => {
  const priced = gramsUnbounded(record, food)
  if (typeof priced === "string") return priced
  return priced.grams > GRAMS_MAX ? `more than ${GRAMS_MAX} g` : priced
}

const gramsUnbounded = (record: FoodRecord, food: ReadFood): Priced | string => {
  const { amount, unit } = food
  if (amount === undefined) {
    const row = typicalRow(record, food.query)
    return row === undefined ? `${record.description} has no household portion; give grams` : fromRow(row, row.amount, "typical")
  }
  if (unit === undefined) {
    const piece = pieceRow(record, food.query)
    if (piece !== undefined) return fromRow(piece, amount, "portion")
    // A food of no pieces ("a latte", "2 coffees") is that many typical servings.
    const row = typicalRow(record, food.query)
    return row === undefined ? `${record.description} has no household portion; give grams` : fromRow(row, amount * row.amount, "typical")
  }
  return gramsOfUnit(record, food.query, amount, unit)
}

const gramsOfUnit = (record: FoodRecord, query: string, amount: number, unit: Unit): Priced | string => {
  switch (unit.kind) {
    case "mass":
      return { grams: Math.max(0.01, round2(amount * unit.grams)), basis: "stated" }
    case "volume": {
      // The food's own row of that unit gives its grams; else its density from any volume row; else 1 g per ml.
      const same = record.portions.find((p) => usable(p) && mlOfRow(p) === unit.ml)
      if (same !== undefined) return fromRow(same, amount, "stated")
      const density = densityOf(record.portions)
      const grams = Math.max(0.01, round2(amount * unit.ml * (density?.perMl ?? 1)))
      return { grams, basis: "stated" }
    }
    case "container": {
      const own = householdRow(record.portions, unit.name)
      // A bag or packet one eats from is a single serving, not the shop's family bag ("a bag of chips" is 1 oz).
      if (own !== undefined && SINGLE_SERVE.has(unit.name) && own.grams / own.amount > SINGLE_SERVE_MAX_GRAMS) {
        const row = typicalRow(record, query)
        if (row !== undefined && row.grams / row.amount <= SINGLE_SERVE_MAX_GRAMS) return fromRow(row, amount * row.amount, "portion")
      }
      if (own !== undefined) return fromRow(own, amount, "portion")
      const density = densityOf(record.portions)
      const grams = Math.max(0.01, round2(amount * unit.ml * (density?.perMl ?? 1)))
      return { grams, basis: "portion", portion: { amount, unit: `${unit.name} (${unit.ml} ml)`, grams } }
    }
    case "household": {
      const own = householdRow(record.portions, unit.name)
      if (own !== undefined && SINGLE_SERVE.has(unit.name) && own.grams / own.amount > SINGLE_SERVE_MAX_GRAMS) {
        const row = typicalRow(record, query)
        if (row !== undefined && row.grams / row.amount <= SINGLE_SERVE_MAX_GRAMS) return fromRow(row, amount * row.amount, "portion")
      }
      if (own !== undefined) return fromRow(own, amount, "portion")
      if (SERVING_WORDS.has(unit.name)) {
        const row = typicalRow(record, query)
        if (row !== undefined) return fromRow(row, amount * row.amount, "portion")
      }
      // A size the food has no portion of ("a large coffee") is one piece or serving of it.
      if ([...SIZES.values()].includes(unit.name)) {
        const piece = pieceRow(record, query)
        if (piece !== undefined) return fromRow(piece, amount, "portion")
        const row = typicalRow(record, query)
        if (row !== undefined) return fromRow(row, amount * row.amount, "portion")
      }
      const units = [...new Set(record.portions.map((p) => p.unit))].slice(0, 8)
      return `${record.description} has no portion "${unit.name}"${units.length === 0 ? "; give grams" : `; its units: ${units.map((u) => JSON.stringify(u)).join(", ")}`}`
    }
  }
}

/**
 * A portion row for a unit as a caller spells it, where the row's own spelling differs: the singular ("slices" is
 * "slice"), a measuring unit by any of its spellings ("tbsp" is "tablespoon", "Tbsp." "tbsp", "fl oz" "fl oz").
 */
export const spelledRow = (portions: ReadonlyArray<FoodPortion>, unit: string): FoodPortion | undefined => {
  const words = unit.trim().toLowerCase().replace(/\.(?=\s|$)/g, "").split(/[\s,]+/)
  const first = words[0] ?? ""
  const measure = measureOf(unit.trim().replace(/\.$/, ""), words.length > 1 && /^fl(?:uid)?$/.test(first) ? "floz" : first)
  if (measure?.kind === "volume") {
    const row = portions.find((p) => usable(p) && mlOfRow(p) === measure.ml)
    if (row !== undefined) return row
  }
  return rowNamed(portions, singular(first), false)
}
