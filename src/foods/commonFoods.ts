/** The shipped USDA subset (everyday SR28 foods, see commonFoods.generate.ts) as food records, and its loading into the database. */
import { Effect } from "effect"
import { Ids } from "../ids.ts"
import data from "./commonFoods.json" with { type: "json" }
import type { FoodRecord } from "./records.ts"
import { BATCH_SIZE, countFoods, recordImport, upsertBatch } from "./repository.ts"

export const COMMON_FOODS_COLUMNS = ["ndb", "food_group", "description", "common_names", "kcal", "protein_g", "carbs_g", "fat_g", "descriptors"]

export interface CommonFoods {
  readonly source: string
  readonly columns: ReadonlyArray<string>
  /** One tab-separated line per food, in the order of `columns`. */
  readonly foods: ReadonlyArray<string>
}

const blankToNull = (s: string | undefined) => (s === undefined || s === "" ? null : s)

const toRecord = (line: string): FoodRecord => {
  const [ndb = "", group, description = "", commonNames, kcal, protein, carbs, fat, descriptors] = line.split("\t")
  return {
    source: "sr28",
    sourceId: ndb,
    dataType: "sr28",
    description,
    foodGroup: blankToNull(group),
    commonNames: blankToNull(commonNames),
    descriptors: blankToNull(descriptors),
    manufacturer: null,
    surveyed: true,
    per100g: { kcal: Number(kcal), protein_g: Number(protein), carbs_g: Number(carbs), fat_g: Number(fat) },
    portions: []
  }
}

const shipped: CommonFoods = data

/** Every food of the shipped subset. */
export const commonFoods = (): ReadonlyArray<FoodRecord> => shipped.foods.map(toRecord)

/** Stores records as one import (the same rows `fooddb import` writes); returns how many. */
export const storeFoods = (records: ReadonlyArray<FoodRecord>, label: string) =>
  Effect.gen(function* () {
    const importId = yield* Ids.next
    for (let i = 0; i < records.length; i += BATCH_SIZE) yield* upsertBatch(records.slice(i, i + BATCH_SIZE), importId)
    yield* recordImport(importId, label, records.length, 0)
    return records.length
  })

/** Stores the shipped subset when the database holds no foods yet (a database with imported data keeps it); returns the count stored. */
export const loadCommonFoods = Effect.gen(function* () {
  const present = (yield* countFoods).reduce((n, row) => n + row.foods, 0)
  return present > 0 ? 0 : yield* storeFoods(commonFoods(), "shipped USDA subset")
}).pipe(Effect.withSpan("foods.loadCommonFoods"))
