/** The food record shared by the importers, the database and the matcher: one food with its energy and macros per 100 g. */
import { Schema } from "effect"
import type { Nutrition } from "../../domain/schemas.ts"

/** Where a record came from; with `sourceId` it identifies the record (re-imports replace by this pair). */
export const FoodSource = Schema.Literal("sr28", "fdc", "fdc_api")
export type FoodSource = typeof FoodSource.Type

export interface FoodPortion {
  readonly amount: number
  /** Household measure, e.g. "cup, chopped" or "1 medium". */
  readonly unit: string
  readonly grams: number
}

export interface FoodRecord {
  readonly source: FoodSource
  /** The source's own record identifier: the NDB number for SR28, the FDC id for FoodData Central. */
  readonly sourceId: string
  /** "sr28", or the FoodData Central data type (foundation_food, sr_legacy_food, survey_fndds_food). */
  readonly dataType: string
  readonly description: string
  readonly foodGroup: string | null
  /** Other names the source lists for the food (SR28 ComName), comma separated. */
  readonly commonNames: string | null
  /** SR28's LanguaL descriptors of the food's source and product type ("SCALLION; VEGETABLE OR VEGETABLE PRODUCT"), "; " separated. */
  readonly descriptors: string | null
  /** Set for branded products; generic records are preferred when matching. */
  readonly manufacturer: string | null
  /** The food is used in dietary surveys (SR28 Survey flag, or an FNDDS/Foundation record): an everyday food. */
  readonly surveyed: boolean
  readonly per100g: Nutrition
  /** The nutrients served beside the four of an analysis; absent, every one is unknown. */
  readonly more?: MoreNutrients
  readonly portions: ReadonlyArray<FoodPortion>
}

/** The nutrients served by food search and nutrition beside SPEC's four, each with its unit in its name. */
export const MORE_NUTRIENTS = [
  "fiber_g",
  "sugars_g",
  "saturated_fat_g",
  "sodium_mg",
  "cholesterol_mg",
  "potassium_mg",
  "calcium_mg",
  "iron_mg",
  "vitamin_c_mg"
] as const
export type MoreNutrient = (typeof MORE_NUTRIENTS)[number]

/** Per 100 g; null where the record does not give the nutrient (never 0 for "unknown"). */
export type MoreNutrients = { readonly [K in MoreNutrient]: number | null }

/** Every more nutrient unknown: one object literal of the one shape every MoreNutrients has (V8 reads and copies those fast). */
export const UNKNOWN_NUTRIENTS: MoreNutrients = Object.freeze({
  fiber_g: null,
  sugars_g: null,
  saturated_fat_g: null,
  sodium_mg: null,
  cholesterol_mg: null,
  potassium_mg: null,
  calcium_mg: null,
  iron_mg: null,
  vitamin_c_mg: null
})

/** Energy, protein, fat and carbohydrate of one record, as collected from nutrient rows. */
export interface NutrientAccumulator {
  kcal?: number
  /** FoodData Central Atwater energies, used only when plain energy (1008) is missing. */
  kcalAtwaterSpecific?: number
  kcalAtwaterGeneral?: number
  protein?: number
  fat?: number
  carbs?: number
  more?: { [K in MoreNutrient]?: number }
}

/** Sets one of the more nutrients, unless the source already gave it (FoodData Central may list sugars twice). */
export const addMore = (acc: NutrientAccumulator, key: MoreNutrient, value: number) => {
  if (!Number.isFinite(value) || value < 0) return
  acc.more ??= {}
  acc.more[key] ??= value
}

/** The more nutrients of a record, unknown where the source did not give them; one shared object when it gave none. */
export const toMore = (acc: NutrientAccumulator | undefined): MoreNutrients => {
  const more = acc?.more
  if (more === undefined) return UNKNOWN_NUTRIENTS
  const out: { [K in MoreNutrient]: number | null } = { ...UNKNOWN_NUTRIENTS }
  for (const key of MORE_NUTRIENTS) out[key] = more[key] ?? null
  return out
}

const nonNegative = (n: number | undefined) => (n !== undefined && Number.isFinite(n) && n > 0 ? n : 0)

/** Per-100 g nutrition, or undefined when the record has no energy value at all (such records are skipped). */
export const toNutrition = (acc: NutrientAccumulator | undefined): Nutrition | undefined => {
  if (acc === undefined) return undefined
  const kcal = acc.kcal ?? acc.kcalAtwaterSpecific ?? acc.kcalAtwaterGeneral
  if (kcal === undefined || !Number.isFinite(kcal) || kcal < 0) return undefined
  return { kcal, protein_g: nonNegative(acc.protein), carbs_g: nonNegative(acc.carbs), fat_g: nonNegative(acc.fat) }
}
