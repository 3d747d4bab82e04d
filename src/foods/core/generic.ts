/** Generic food names ("nuts", "seafood", "leafy greens") and the SR28 families whose median per 100 g stands for them. */
import type { Nutrition } from "../../domain/schemas.ts"
import type { FoodRecord } from "./records.ts"

/** Whether a family's members are taken cooked, raw, or as SR28 lists them (nuts are roasted or dried alike). */
export type Form = "cooked" | "raw" | "any"

export interface Family {
  /** Said in results: "median of 14 USDA nuts records". */
  readonly label: string
  /** Queries that name the family and nothing more (noise and preparation words aside); "mixed nuts" has its own record. */
  readonly names: ReadonlyArray<string>
  readonly form: Form
  readonly member: (record: FoodRecord, description: string) => boolean
}

/** The words before the first comma of a lower-cased description: "nuts" in "nuts, almonds, dry roasted". */
const headOf = (description: string) => (description.split(",")[0] ?? "").trim()
const headIn = (...heads: ReadonlyArray<string>) => (_: FoodRecord, description: string) => heads.includes(headOf(description))
const groupIs =
  (...groups: ReadonlyArray<string>) =>
  (record: FoodRecord) =>
    groups.includes(record.foodGroup ?? "")

/** Products made from a food (butters, flours, oils, juices) that no one means by the generic name. */
const PRODUCT = /\b(?:butter|flour|meal|oil|paste|milk|juice|nectar|concentrate|syrup|canned|dried|dehydrated|powder|frozen|pickled|juice pack|breaded|imitation|spread|product|substitute)\b/

/** Families named by a generic word: the one piece of food knowledge SR28's own wording does not give. */
export const FAMILIES: ReadonlyArray<Family> = [
  { label: "nuts", names: ["nuts", "nut", "assorted nuts"], form: "any", member: (_, d) => headOf(d) === "nuts" && !/\b(?:butter|flour|meal|oil|paste|milk)\b/.test(d) },
  { label: "seeds", names: ["seeds", "mixed seeds"], form: "any", member: (_, d) => headOf(d) === "seeds" && !/\b(?:butter|flour|meal|oil|paste|milk|protein)\b/.test(d) },
  { label: "seafood", names: ["seafood", "mixed seafood", "seafood mix"], form: "cooked", member: (r, d) => groupIs("Finfish and Shellfish Products")(r) && !PRODUCT.test(d) },
  { label: "shellfish", names: ["shellfish"], form: "cooked", member: (_, d) => ["crustaceans", "mollusks"].includes(headOf(d)) && !PRODUCT.test(d) },
  { label: "fish", names: ["fish"], form: "cooked", member: (_, d) => headOf(d) === "fish" && !PRODUCT.test(d) && !/\b(?:roe|eggs|liver|salted|smoked|caviar)\b/.test(d) },
  {
    label: "berries",
    names: ["berries", "mixed berries", "berry mix", "assorted berries"],
    form: "raw",
    member: headIn("strawberries", "blueberries", "raspberries", "blackberries", "boysenberries", "gooseberries", "mulberries")
  },
  {
    label: "leafy greens",
    names: ["leafy greens", "dark leafy greens", "cooking greens"],
    form: "raw",
    member: headIn("lettuce", "spinach", "kale", "chard", "collards", "arugula", "cress", "endive", "escarole", "radicchio", "beet greens", "turnip greens", "mustard greens", "dandelion greens")
  },
  {
    label: "vegetables",
    names: ["vegetables", "veggies", "vegetable medley", "assorted vegetables"],
    form: "cooked",
    member: (r, d) => groupIs("Vegetables and Vegetable Products")(r) && !PRODUCT.test(d) && !/^(?:potato|sweet potato|beans|peas|corn|soybeans|lentils|chickpeas)/.test(d)
  },
  { label: "fruit", names: ["fruit", "mixed fruit", "assorted fruit", "fruit salad", "fresh fruit salad"], form: "raw", member: (r, d) => groupIs("Fruits and Fruit Juices")(r) && !PRODUCT.test(d) },
  {
    label: "herbs",
    names: ["herbs", "mixed herbs"],
    form: "any",
    member: (_, d) => /^(?:basil|parsley|coriander \(cilantro\) leaves|dill weed|peppermint|spearmint|chives|rosemary|thyme|tarragon|sage), (?:fresh|raw)/.test(d)
  },
  { label: "beans", names: ["beans", "legumes", "mixed beans"], form: "cooked", member: (_, d) => headOf(d) === "beans" && /mature seeds, cooked, boiled/.test(d) },
  { label: "meat", names: ["meat"], form: "cooked", member: (r, d) => groupIs("Beef Products", "Pork Products", "Lamb, Veal, and Game Products")(r) && /separable lean and fat/.test(d) },
  { label: "poultry", names: ["poultry"], form: "cooked", member: (r, d) => groupIs("Poultry Products")(r) && /meat (?:only|and skin)/.test(d) },
  { label: "cheese", names: ["cheese"], form: "any", member: (_, d) => headOf(d) === "cheese" && !/\b(?:spread|product|food|imitation|substitute|sauce)\b/.test(d) },
  { label: "salad dressings", names: ["dressing", "salad dressing"], form: "any", member: (_, d) => headOf(d) === "salad dressing" }
]

export interface FamilyMember {
  readonly record: FoodRecord
  /** The record's preparation words ("cooked", "boiled", "raw"). */
  readonly states: ReadonlySet<string>
  readonly cooked: boolean
  readonly raw: boolean
}

export interface Fallback {
  readonly family: Family
  /** The member nearest the median on all four values: the record the median stands for. */
  readonly representative: FoodRecord
  readonly median: Nutrition
  readonly members: number
}

const KEYS = ["kcal", "protein_g", "carbs_g", "fat_g"] as const

/** The middle of the values (the mean of the two middle ones when their count is even); sorts them in place. */
export const medianOf = (values: Array<number>) => {
  values.sort((a, b) => a - b)
  const mid = values.length >> 1
  return values.length % 2 === 1 ? values[mid]! : (values[mid - 1]! + values[mid]!) / 2
}

/** Fewer members than this say too little about a family: the item is matched as usual. */
const MIN_MEMBERS = 3

/**
 * With the model's estimate, the half of the fitting members nearest it: a generic "fish" the model saw as lean
 * white fish (95 kcal) is priced among lean fish, not at the median of every species (124 kcal).
 */
const NEAREST_SHARE = 0.5

/**
 * The median per 100 g of the members in the query's form that fit the model's guess (only the everyday ones when at
 * least three of those fit; the nearer half of them, given `fromGuess`, a member's distance from the guess), with the
 * member nearest it.
 */
export const familyMedian = (
  family: Family,
  members: ReadonlyArray<FamilyMember>,
  inForm: (member: FamilyMember) => boolean,
  fits: (n: Nutrition) => boolean,
  fromGuess?: (n: Nutrition) => number
): Fallback | undefined => {
  let chosen = members.filter((m) => inForm(m) && fits(m.record.per100g))
  if (chosen.length < MIN_MEMBERS) return undefined
  // The foods people eat (SR28's survey flag) stand for the name: "fish" is cod, salmon or tilapia, not burbot or cusk.
  const everyday = chosen.filter((m) => m.record.surveyed)
  if (everyday.length >= MIN_MEMBERS) chosen = everyday
  if (fromGuess !== undefined) {
    const keep = Math.max(MIN_MEMBERS, Math.ceil(chosen.length * NEAREST_SHARE))
    chosen = chosen.map((m) => [m, fromGuess(m.record.per100g)] as const).sort((a, b) => a[1] - b[1]).slice(0, keep).map(([m]) => m)
  }
  const of = (key: (typeof KEYS)[number]) => Math.round(medianOf(chosen.map((m) => m.record.per100g[key])) * 100) / 100
  const median: Nutrition = { kcal: of("kcal"), protein_g: of("protein_g"), carbs_g: of("carbs_g"), fat_g: of("fat_g") }
  const distance = (n: Nutrition) => KEYS.reduce((sum, key) => sum + Math.abs(Math.log((n[key] + 1) / (median[key] + 1))), 0)
  const representative = chosen.reduce((best, m) => (distance(m.record.per100g) < distance(best.record.per100g) ? m : best)).record
  return { family, representative, median, members: chosen.length }
}
