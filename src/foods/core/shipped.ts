/**
 * The shipped copy of USDA SR28 (all its foods with the served nutrients and household portions, made by
 * shipped.generate.ts): read from its gzip file, and stored on a first start that finds no foods in the database.
 */
import { existsSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { gunzipSync } from "node:zlib"
import { Effect } from "effect"
import { Ids } from "../../ids.ts"
import { type FoodPortion, type FoodRecord, MORE_NUTRIENTS, type MoreNutrients, UNKNOWN_NUTRIENTS } from "./records.ts"
import { BATCH_SIZE, countFoods, recordImport, upsertBatch } from "./repository.ts"

/** The import label of the shipped copy: the banner names it, and an import of USDA's own files replaces it. */
export const SHIPPED_LABEL = "USDA SR28 (shipped copy)"

export const SHIPPED_FILE = "sr28.tsv.gz"

/**
 * Columns of the shipped file, tab separated, one food a line after a `#` header: the more nutrients are blank where
 * SR28 lacks them; portions are `amount|unit|grams` joined by `;`; the surveyed flag is `Y` or blank.
 */
export const SHIPPED_COLUMNS = [
  "ndb",
  "food_group",
  "description",
  "common_names",
  "manufacturer",
  "surveyed",
  "kcal",
  "protein_g",
  "carbs_g",
  "fat_g",
  ...MORE_NUTRIENTS,
  "descriptors",
  "portions"
] as const

/** The file sits in src/foods/data/ in the source tree; the bundle and the compiled modules read it there. */
export const shippedPath = (): string => {
  const candidates = ["../data/", "../../src/foods/data/", "../../../../src/foods/data/"].map((path) => fileURLToPath(new URL(path + SHIPPED_FILE, import.meta.url)))
  return candidates.find((path) => existsSync(path)) ?? candidates[0]!
}

const blankToNull = (s: string | undefined) => (s === undefined || s === "" ? null : s)

const toPortions = (text: string, units: Map<string, string>): ReadonlyArray<FoodPortion> =>
  text === ""
    ? []
    : text.split(";").map((entry) => {
        const [amount = "1", unit = "", grams = "0"] = entry.split("|")
        let shared = units.get(unit)
        if (shared === undefined) {
          shared = unit
          units.set(unit, unit)
        }
        return { amount: Number(amount), unit: shared, grams: Number(grams) }
      })

/** Every food of the shipped copy, as the importers read them from USDA's files. */
export const shippedFoods = (path: string = shippedPath()): ReadonlyArray<FoodRecord> => {
  const lines = gunzipSync(readFileSync(path)).toString("utf8").split("\n")
  const units = new Map<string, string>()
  const records: Array<FoodRecord> = []
  for (const line of lines) {
    if (line === "" || line.startsWith("#")) continue
    const f = line.split("\t")
    const value = (i: number) => (f[10 + i] === undefined || f[10 + i] === "" ? null : Number(f[10 + i]))
    // Columns in MORE_NUTRIENTS's order; one object literal of one shape per food.
    const more: MoreNutrients = {
      fiber_g: value(0),
      sugars_g: value(1),
      saturated_fat_g: value(2),
      sodium_mg: value(3),
      cholesterol_mg: value(4),
      potassium_mg: value(5),
      calcium_mg: value(6),
      iron_mg: value(7),
      vitamin_c_mg: value(8)
    }
    const known = MORE_NUTRIENTS.some((key) => more[key] !== null)
    records.push({
      source: "sr28",
      sourceId: f[0] ?? "",
      dataType: "sr28",
      description: f[2] ?? "",
      foodGroup: blankToNull(f[1]),
      commonNames: blankToNull(f[3]),
      manufacturer: blankToNull(f[4]),
      surveyed: f[5] === "Y",
      per100g: { kcal: Number(f[6]), protein_g: Number(f[7]), carbs_g: Number(f[8]), fat_g: Number(f[9]) },
      more: known ? more : UNKNOWN_NUTRIENTS,
      descriptors: blankToNull(f[19]),
      portions: toPortions(f[20] ?? "", units)
    })
  }
  return records
}

/** Stores records as one import (the same rows `fooddb import` writes); returns how many. */
export const storeFoods = (records: ReadonlyArray<FoodRecord>, label: string) =>
  Effect.gen(function* () {
    const importId = yield* Ids.next
    let portions = 0
    for (let i = 0; i < records.length; i += BATCH_SIZE) portions += yield* upsertBatch(records.slice(i, i + BATCH_SIZE), importId)
    yield* recordImport(importId, label, records.length, portions)
    return records.length
  })

/** Stores the shipped copy when the database holds no foods yet (a database with imported data keeps it); returns the count stored. */
export const loadShippedFoods = Effect.gen(function* () {
  const present = (yield* countFoods).reduce((n, row) => n + row.foods, 0)
  if (present > 0) return 0
  const stored = yield* storeFoods(shippedFoods(), SHIPPED_LABEL)
  yield* Effect.logInfo("stored the shipped USDA SR28 copy: the database held no foods").pipe(Effect.annotateLogs({ foods: stored }))
  return stored
}).pipe(Effect.withSpan("foods.loadShippedFoods"))
