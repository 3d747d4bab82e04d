import { cpSync, createWriteStream, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { ZipFile } from "yazl"
import { importFoods } from "../../src/foods/core/importer.ts"
import { countFoods, loadRecords } from "../../src/foods/core/repository.ts"
import { TestDatabase } from "../support/database.ts"
import { FDC_FIXTURE_DIR, hasSr28, SR28_DIR, sr28Notice } from "./paths.ts"

const quiet = { progress: () => {} }

const scratch = () => mkdtempSync(join(tmpdir(), "morsel-foods-"))

/** Packs the FDC fixture under a top-level folder, as USDA ships it, with yazl (a zip writer of its own). */
const zipFixture = (path: string, options: { readonly compress: boolean; readonly forceZip64Format: boolean }) =>
  Effect.promise(
    () =>
      new Promise<void>((resolve, reject) => {
        const zip = new ZipFile()
        for (const name of readdirSync(FDC_FIXTURE_DIR)) {
          zip.addBuffer(readFileSync(join(FDC_FIXTURE_DIR, name)), `FoodData_Central_csv_2024-10-31/${name}`, options)
        }
        zip.addEmptyDirectory("FoodData_Central_csv_2024-10-31/extra")
        zip.end({ forceZip64Format: options.forceZip64Format, comment: "" })
        zip.outputStream.pipe(createWriteStream(path)).on("finish", resolve).on("error", reject)
      })
  )

const foodRows = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  return yield* sql<{ source_id: string; data_type: string; description: string; kcal: number; protein_g: number; fat_g: number; carbs_g: number }>`
    SELECT source_id, data_type, description, kcal, protein_g, fat_g, carbs_g FROM foods WHERE source = 'fdc' ORDER BY source_id`
})

describe("food import", () => {
  it.layer(TestDatabase, { timeout: 120_000 })("FoodData Central CSV", (it) => {
    it.effect("loads generic foods with energy (1008, else Atwater), macros and portions; branded and energy-less foods are left out", () =>
      Effect.gen(function* () {
        const lines: Array<string> = []
        const summary = yield* importFoods(FDC_FIXTURE_DIR, { progress: (line) => lines.push(line) })
        expect(summary.foods).toBe(4)
        expect(summary.portions).toBe(5)
        expect(lines.some((line) => line.includes("food_nutrient.csv"))).toBe(true)
        const rows = yield* foodRows
        expect(rows.map((r) => [r.source_id, r.data_type])).toEqual([
          ["169756", "sr_legacy_food"],
          ["2705523", "survey_fndds_food"],
          ["2708412", "survey_fndds_food"],
          ["321358", "foundation_food"]
        ])
        const hummus = rows.find((r) => r.source_id === "321358")!
        // Foundation foods carry no 1008 energy: the Atwater specific-factor value (2048) is used.
        expect(hummus).toMatchObject({ description: "Hummus, commercial", kcal: 229, protein_g: 7.35, fat_g: 17.1, carbs_g: 14.9 })
        expect(rows.find((r) => r.source_id === "169756")).toMatchObject({ kcal: 130, fat_g: 0.28 })
        // The nutrients beside the four: a 0 the record gives stays 0, one it lacks is null.
        const records = yield* loadRecords(["fdc"])
        expect(records.find((r) => r.sourceId === "169756")!.more).toEqual({
          fiber_g: 0.4,
          sugars_g: 0.05,
          saturated_fat_g: 0.077,
          sodium_mg: 1,
          cholesterol_mg: 0,
          potassium_mg: 35,
          calcium_mg: 10,
          iron_mg: 1.2,
          vitamin_c_mg: null
        })
        // Foundation foods give total sugars as 1063.
        expect(records.find((r) => r.sourceId === "321358")!.more).toMatchObject({ sugars_g: 0.34, sodium_mg: 426, fiber_g: null })
        expect(records.find((r) => r.sourceId === "2705523")!.more).toMatchObject({ fiber_g: null, sodium_mg: null })
        expect(rows.find((r) => r.source_id === "2708412")!.description).toBe('Caesar salad, "classic", with romaine and croutons')
        const sql = yield* SqlClient.SqlClient
        const portions = yield* sql<{ source_id: string; unit: string; grams: number }>`
          SELECT source_id, unit, grams FROM food_portions WHERE source = 'fdc' ORDER BY source_id, seq`
        expect(portions).toEqual([
          { source_id: "169756", unit: "cup", grams: 158 },
          { source_id: "2705523", unit: "1 cup", grams: 248 },
          { source_id: "2708412", unit: "1 cup", grams: 49 },
          { source_id: "321358", unit: "tablespoon", grams: 15 },
          { source_id: "321358", unit: "cup", grams: 246 }
        ])
      }))

    it.effect("re-importing replaces rows and never duplicates them; foods gone from the download are removed", () =>
      Effect.gen(function* () {
        yield* importFoods(FDC_FIXTURE_DIR, quiet)
        yield* importFoods(FDC_FIXTURE_DIR, quiet)
        expect(yield* countFoods).toEqual([{ source: "fdc", foods: 4, portions: 5 }])
        // A newer download without the caesar salad and with a corrected rice energy.
        const dir = scratch()
        cpSync(FDC_FIXTURE_DIR, dir, { recursive: true })
        const food = readFileSync(join(dir, "food.csv"), "utf8").split("\n").filter((l) => !l.startsWith('"2708412"'))
        writeFileSync(join(dir, "food.csv"), food.join("\n"))
        writeFileSync(join(dir, "food_nutrient.csv"), readFileSync(join(dir, "food_nutrient.csv"), "utf8").replace('"1008","130"', '"1008","131"'))
        const summary = yield* importFoods(dir, quiet)
        rmSync(dir, { recursive: true, force: true })
        expect(summary.datasets[0]!.removed).toBe(1)
        expect(yield* countFoods).toEqual([{ source: "fdc", foods: 3, portions: 4 }])
        expect((yield* foodRows).find((r) => r.source_id === "169756")!.kcal).toBe(131)
      }))

    it.effect("reads the same download from a zip file with a top-level folder, deflated or stored with zip64 records", () =>
      Effect.gen(function* () {
        for (const options of [
          { compress: true, forceZip64Format: false },
          { compress: false, forceZip64Format: true }
        ]) {
          const dir = scratch()
          const zip = join(dir, "FoodData_Central_csv.zip")
          yield* zipFixture(zip, options)
          const summary = yield* importFoods(zip, quiet)
          rmSync(dir, { recursive: true, force: true })
          expect(summary.datasets.map((d) => [d.label, d.kind, d.foods, d.portions])).toEqual([
            ["FoodData_Central_csv.zip:FoodData_Central_csv_2024-10-31", "fdc", 4, 5]
          ])
          expect(yield* countFoods).toEqual([{ source: "fdc", foods: 4, portions: 5 }])
          expect((yield* foodRows).find((r) => r.source_id === "2708412")!.description).toBe('Caesar salad, "classic", with romaine and croutons')
        }
      }))

    it.effect("a file that is not a zip is refused with a clear message", () =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(importFoods(join(FDC_FIXTURE_DIR, "food.csv"), quiet))
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("food.csv is neither a folder nor a readable zip file")
      }))

    it.effect("a folder without USDA files is refused with a clear message", () =>
      Effect.gen(function* () {
        const dir = scratch()
        const exit = yield* Effect.exit(importFoods(dir, quiet))
        rmSync(dir, { recursive: true, force: true })
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("neither USDA SR28 ASCII files")
      }))
  })

  sr28Notice()
  it.layer(TestDatabase, { timeout: 180_000 })("USDA SR28 ASCII", (it) => {
    it.effect.skipIf(!hasSr28)(
      "loads all 8,789 foods and 15,438 portions with their LanguaL descriptors; the NDB number is the record id; a second import changes nothing",
      () =>
        Effect.gen(function* () {
          const first = yield* importFoods(SR28_DIR, quiet)
          expect(first.foods).toBe(8789)
          expect(first.portions).toBe(15438)
          const sql = yield* SqlClient.SqlClient
          const [rice] = yield* sql<{ description: string; kcal: number; carbs_g: number }>`
            SELECT description, kcal, carbs_g FROM foods WHERE source = 'sr28' AND source_id = '20045'`
          expect(rice).toEqual({ description: "Rice, white, long-grain, regular, enriched, cooked", kcal: 130, carbs_g: 28.17 })
          // LanguaL's food source and product type are kept, without source notes or the numbered SR group entries.
          const kasha = (yield* loadRecords()).find((r) => r.sourceId === "20010")
          expect(kasha).toMatchObject({ commonNames: "kasha", descriptors: "MILLED GRAIN OR STARCH PRODUCT; BUCKWHEAT" })
          const riceRecord = (yield* loadRecords()).find((r) => r.sourceId === "20045")!
          expect(riceRecord.more).toEqual({
            fiber_g: 0.4,
            sugars_g: 0.05,
            saturated_fat_g: 0.077,
            sodium_mg: 1,
            cholesterol_mg: 0,
            potassium_mg: 35,
            calcium_mg: 10,
            iron_mg: 1.2,
            vitamin_c_mg: 0
          })
          expect(riceRecord.portions[0]).toEqual({ amount: 1, unit: "cup", grams: 158 })
          const second = yield* importFoods(SR28_DIR, quiet)
          expect(second.datasets[0]!.removed).toBe(0)
          expect(yield* countFoods).toEqual([{ source: "sr28", foods: 8789, portions: 15438 }])
        }),
      180_000
    )
  })
})
