/** The units a meal's words name: weights, measuring volumes, containers, and the household words of foods' portions. */

/** A unit as read: a weight or a measuring volume (grams as stated), a container, or a household word of the food's portions. */
export type Unit =
  | { readonly kind: "mass"; readonly name: string; readonly grams: number }
  | { readonly kind: "volume"; readonly name: string; readonly ml: number }
  | { readonly kind: "container"; readonly name: string; readonly ml: number }
  | { readonly kind: "household"; readonly name: string }

const mass = (name: string, grams: number, ...spellings: ReadonlyArray<string>) => spellings.map((s) => [s, { kind: "mass", name, grams }] as const)
const volume = (name: string, ml: number, ...spellings: ReadonlyArray<string>) => spellings.map((s) => [s, { kind: "volume", name, ml }] as const)
const container = (name: string, ml: number, ...spellings: ReadonlyArray<string>) => spellings.map((s) => [s, { kind: "container", name, ml }] as const)

/** Measuring volumes in ml: US cup, tablespoon, teaspoon and fluid ounce. */
export const CUP_ML = 236.6
export const TBSP_ML = 14.79
export const TSP_ML = 4.93
export const FL_OZ_ML = 29.57

/** Weights and measuring volumes by their spellings (lower case, without a trailing period). */
const MEASURES: ReadonlyMap<string, Unit> = new Map<string, Unit>([
  ...mass("g", 1, "g", "gr", "grs", "gm", "gms", "gram", "grams", "gramme", "grammes"),
  ...mass("kg", 1000, "kg", "kgs", "kilo", "kilos", "kilogram", "kilograms", "kilogramme", "kilogrammes"),
  ...mass("mg", 0.001, "mg", "milligram", "milligrams"),
  ...mass("oz", 28.3495, "oz", "ozs", "ounce", "ounces"),
  ...mass("lb", 453.592, "lb", "lbs", "pound", "pounds"),
  ...volume("ml", 1, "ml", "mls", "millilitre", "millilitres", "milliliter", "milliliters", "cc"),
  ...volume("cl", 10, "cl", "centilitre", "centilitres", "centiliter", "centiliters"),
  ...volume("dl", 100, "dl", "decilitre", "decilitres", "deciliter", "deciliters"),
  ...volume("l", 1000, "l", "litre", "litres", "liter", "liters", "ltr"),
  ...volume("cup", CUP_ML, "cup", "cups", "c", "cp"),
  ...volume("tbsp", TBSP_ML, "tbsp", "tbsps", "tbs", "tbl", "tbls", "tblsp", "tablespoon", "tablespoons", "tablespoonful", "tablespoonfuls"),
  ...volume("tsp", TSP_ML, "tsp", "tsps", "teaspoon", "teaspoons", "teaspoonful", "teaspoonfuls"),
  ...volume("fl oz", FL_OZ_ML, "floz", "fl.oz", "fl-oz"),
  ...volume("pint", 473.2, "pint", "pints", "pt"),
  ...volume("quart", 946.4, "quart", "quarts", "qt"),
  ...volume("gallon", 3785.4, "gallon", "gallons", "gal")
])

/** Containers a food may have no portion for, as volumes. */
const CONTAINERS: ReadonlyMap<string, Unit> = new Map<string, Unit>([
  ...container("glass", 240, "glass", "glasses"),
  ...container("mug", 240, "mug", "mugs", "mugful"),
  ...container("can", 355, "can", "cans", "tin", "tins"),
  ...container("bottle", 500, "bottle", "bottles"),
  ...container("bowl", 355, "bowl", "bowls", "bowlful"),
  // A handful is about a quarter cup (an ounce of nuts); a splash of milk two tablespoons; a dash or pinch an eighth of a teaspoon.
  ...container("handful", 60, "handful", "handfuls"),
  ...container("splash", 30, "splash", "splashes"),
  ...container("dash", 0.6, "dash", "dashes"),
  ...container("pinch", 0.3, "pinch", "pinches")
])

/** Household words read as a unit after an amount (any word followed by "of" is read so too). */
const HOUSEHOLD_WORDS =
  "slice piece pc link patty strip stick pat fillet filet scoop square wedge clove stalk sprig leaf head ear spear serving portion helping plate bar cube bunch packet package pack sachet container carton jar bag box tub shot drop sheet round ring segment floret chunk rasher loaf cookie cracker biscuit muffin wing drumstick thigh breast leg chop steak sausage medium large small big jumbo mini extra-large"

const HOUSEHOLD: ReadonlySet<string> = new Set(HOUSEHOLD_WORDS.split(" "))

/** Sizes: read as the food's portion of that size, or as a piece when it has none. */
export const SIZES: ReadonlyMap<string, string> = new Map([
  ["small", "small"],
  ["medium", "medium"],
  ["med", "medium"],
  ["large", "large"],
  ["big", "large"],
  ["jumbo", "jumbo"],
  ["mini", "small"],
  ["extra-large", "extra large"]
])

/** Words that mean one helping of the food, whatever its portions: read as its typical serving. */
export const SERVING_WORDS: ReadonlySet<string> = new Set(["serving", "portion", "helping", "plate", "plateful"])

/** A word in its singular: "slices" → "slice", "patties" → "patty", "leaves" → "leaf", "boxes" → "box". */
export const singular = (word: string): string => {
  if (word.length <= 3 || word.endsWith("ss") || word.endsWith("us")) return word
  if (word.endsWith("ies")) return `${word.slice(0, -3)}y`
  if (word.endsWith("ves")) return `${word.slice(0, -3)}f`
  if (/(?:ch|sh|x|s)es$/.test(word) && !word.endsWith("ses")) return word.slice(0, -2)
  if (word.endsWith("oes")) return word.slice(0, -2)
  if (word.endsWith("s")) return word.slice(0, -1)
  return word
}

/** A weight or measuring volume spelt so ("Tbsp", "grams", "fl oz" as one word); case matters only for T and t. */
export const measureOf = (raw: string, word: string): Unit | undefined => {
  // Recipe shorthand: a capital T is a tablespoon, a small t a teaspoon.
  if (raw === "T" || raw === "T.") return MEASURES.get("tbsp")
  if (raw === "t" || raw === "t.") return MEASURES.get("tsp")
  return MEASURES.get(word)
}

export const containerOf = (word: string): Unit | undefined => CONTAINERS.get(word)

/** A household word (singular) if the word is one. */
export const householdOf = (word: string): Unit | undefined => {
  const one = singular(word)
  if (SIZES.has(word)) return { kind: "household", name: SIZES.get(word) ?? word }
  return HOUSEHOLD.has(one) || SERVING_WORDS.has(one) ? { kind: "household", name: one } : undefined
}

/** Units whose grams count as stated (a weight or a measuring volume). */
export const isStated = (unit: Unit) => unit.kind === "mass" || unit.kind === "volume"
