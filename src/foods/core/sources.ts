/** Streaming readers of the USDA downloads (SR28 ASCII and FoodData Central CSV, in a folder or a zip) into food records. */
import { createReadStream } from "node:fs"
import { readdir, stat } from "node:fs/promises"
import { basename, dirname, join, relative } from "node:path"
import { Readable } from "node:stream"
import { delimited, recordsMentioning } from "./delimited.ts"
import { addMore, type FoodPortion, type FoodRecord, type MoreNutrient, type NutrientAccumulator, toMore, toNutrition } from "./records.ts"
import { listZip, openZipEntry } from "./zip.ts"

/** One download found under the given path: the files of one folder, opened on demand. */
export interface Dataset {
  readonly kind: "sr28" | "fdc"
  /** Folder (or zip folder) the files were found in, for progress output. */
  readonly label: string
  readonly open: (file: string) => Promise<Readable> | undefined
}

export type Progress = (message: string) => void

export class DatasetNotFound extends Error {
  override readonly name = "DatasetNotFound"
}

const SR28_MARKER = "food_des.txt"
const FDC_MARKER = "food.csv"

const classify = (label: string, files: Map<string, () => Promise<Readable>>): Dataset | undefined => {
  const kind = files.has(SR28_MARKER) ? "sr28" : files.has(FDC_MARKER) ? "fdc" : undefined
  if (kind === undefined) return undefined
  return { kind, label, open: (file) => files.get(file.toLowerCase())?.() }
}

/** Folders up to three levels deep, so a download unpacked into its own folder is found too. */
const walk = async (root: string, depth: number, into: Map<string, Map<string, () => Promise<Readable>>>) => {
  for (const entry of await readdir(root, { withFileTypes: true })) {
    const full = join(root, entry.name)
    if (entry.isDirectory() && depth < 3) await walk(full, depth + 1, into)
    else if (entry.isFile()) {
      const folder = into.get(root) ?? new Map<string, () => Promise<Readable>>()
      folder.set(entry.name.toLowerCase(), async () => createReadStream(full))
      into.set(root, folder)
    }
  }
}

/** Finds every SR28 or FoodData Central download in a folder or a zip file. */
export const locateDatasets = async (path: string): Promise<ReadonlyArray<Dataset>> => {
  const info = await stat(path).catch(() => undefined)
  if (info === undefined) throw new DatasetNotFound(`${path} does not exist`)
  const folders = new Map<string, Map<string, () => Promise<Readable>>>()
  if (info.isDirectory()) {
    await walk(path, 0, folders)
  } else {
    const names = await listZip(path).catch((error: unknown) => {
      throw new DatasetNotFound(`${path} is neither a folder nor a readable zip file (${error instanceof Error ? error.message : String(error)})`)
    })
    for (const name of names) {
      const folder = `${basename(path)}:${dirname(name)}`
      const files = folders.get(folder) ?? new Map<string, () => Promise<Readable>>()
      files.set(basename(name).toLowerCase(), () => openZipEntry(path, name))
      folders.set(folder, files)
    }
  }
  const datasets: Array<Dataset> = []
  for (const [folder, files] of [...folders].sort(([a], [b]) => a.localeCompare(b))) {
    const dataset = classify(info.isDirectory() ? relative(path, folder) || basename(path) : folder, files)
    if (dataset !== undefined) datasets.push(dataset)
  }
  if (datasets.length === 0) {
    throw new DatasetNotFound(`${path} holds neither USDA SR28 ASCII files (FOOD_DES.txt, …) nor a FoodData Central CSV download (food.csv, …)`)
  }
  return datasets
}

const count = (n: number) => n.toLocaleString("en-US")

const required = async (dataset: Dataset, file: string) => {
  const stream = await dataset.open(file)
  if (stream === undefined) throw new DatasetNotFound(`${dataset.label}: ${file} is missing`)
  return stream
}

// ---------------------------------------------------------------------------------------------
// SR28 ASCII: "^"-separated fields, text fields wrapped in "~", ISO-8859-1.

/** SR28 rows as arrays of fields ("~~" inside a text field would stand for one "~"). */
const sr28Rows = (stream: Readable) =>
  delimited<ReadonlyArray<string>>(stream, { delimiter: "^", quote: "~", escape: "~", encoding: "latin1" })

type Macro = Exclude<keyof NutrientAccumulator, "more">

const SR_NUTRIENTS: Record<string, Macro> = { "208": "kcal", "203": "protein", "204": "fat", "205": "carbs" }

/** SR28 nutrient numbers (NUTR_DEF.txt) of the nutrients served beside the four: units g, g, g, then mg. */
export const SR_MORE: Record<string, MoreNutrient> = {
  "291": "fiber_g",
  "269": "sugars_g",
  "606": "saturated_fat_g",
  "307": "sodium_mg",
  "601": "cholesterol_mg",
  "306": "potassium_mg",
  "301": "calcium_mg",
  "303": "iron_mg",
  "401": "vitamin_c_mg"
}

const blankToNull = (s: string | undefined) => (s === undefined || s.trim() === "" ? null : s.trim())

/** LanguaL facets kept for matching: A, the product type, and B, the food source ("SCALLION"). */
const KEPT_FACETS = /^[AB]/

/**
 * The LanguaL descriptors of each food (LANGUAL and LANGDESC, when the download has them), facets A and B only,
 * without the "(US CFR)" style source notes and the numbered SR food-group entries that repeat FD_GROUP.
 */
const readDescriptors = async (dataset: Dataset): Promise<ReadonlyMap<string, string>> => {
  const langdesc = await dataset.open("LANGDESC.txt")
  if (langdesc === undefined) return new Map()
  const texts = new Map<string, string>()
  for await (const [code, text] of sr28Rows(langdesc)) {
    if (!code || !text || !KEPT_FACETS.test(code) || /^\d/.test(text)) continue
    texts.set(code, text.replace(/\s*\([^)]*\)\s*$/, ""))
  }
  const langual = await dataset.open("LANGUAL.txt")
  if (langual === undefined) return new Map()
  const byFood = new Map<string, Array<string>>()
  for await (const [ndb, code] of sr28Rows(langual)) {
    const text = texts.get(code ?? "")
    if (ndb === undefined || text === undefined) continue
    const list = byFood.get(ndb) ?? []
    list.push(text)
    byFood.set(ndb, list)
  }
  return new Map([...byFood].map(([ndb, list]) => [ndb, list.join("; ")]))
}

/** Reads FOOD_DES, FD_GROUP, NUT_DATA (208/203/204/205), WEIGHT and LanguaL into records keyed by NDB number. */
export const readSr28 = async (dataset: Dataset, progress: Progress): Promise<ReadonlyArray<FoodRecord>> => {
  const groups = new Map<string, string>()
  const groupStream = await dataset.open("FD_GROUP.txt")
  if (groupStream !== undefined) {
    for await (const [code, name] of sr28Rows(groupStream)) {
      if (code && name) groups.set(code, name)
    }
  }
  const foods = new Map<string, { fields: ReadonlyArray<string>; nutrients: NutrientAccumulator; portions: Array<FoodPortion> }>()
  for await (const fields of sr28Rows(await required(dataset, "FOOD_DES.txt"))) {
    if (fields[0]) foods.set(fields[0], { fields, nutrients: {}, portions: [] })
  }
  progress(`${dataset.label}: FOOD_DES.txt ${count(foods.size)} foods`)
  const descriptors = await readDescriptors(dataset)
  if (descriptors.size > 0) progress(`${dataset.label}: LANGUAL.txt ${count(descriptors.size)} foods described`)
  let nutrientLines = 0
  const seen = () => {
    nutrientLines++
    if (nutrientLines % 200_000 === 0) progress(`${dataset.label}: NUT_DATA.txt ${count(nutrientLines)} lines`)
  }
  const nutrientData = Readable.from(
    recordsMentioning(
      await required(dataset, "NUT_DATA.txt"),
      { encoding: "latin1", quote: "~", header: false, needles: [...Object.keys(SR_NUTRIENTS), ...Object.keys(SR_MORE)].map((n) => `~${n}~`) },
      seen
    )
  )
  for await (const [ndb, nutrient, value] of sr28Rows(nutrientData)) {
    const key = SR_NUTRIENTS[nutrient ?? ""]
    const more = SR_MORE[nutrient ?? ""]
    if (key === undefined && more === undefined) continue
    const food = ndb === undefined ? undefined : foods.get(ndb)
    if (food === undefined || value === undefined || value === "") continue
    if (key !== undefined) food.nutrients[key] = Number(value)
    else if (more !== undefined) addMore(food.nutrients, more, Number(value))
  }
  progress(`${dataset.label}: NUT_DATA.txt ${count(nutrientLines)} lines`)
  let portionCount = 0
  const weights = await dataset.open("WEIGHT.txt")
  if (weights !== undefined) {
    for await (const [ndb, , amount, unit, grams] of sr28Rows(weights)) {
      const food = ndb === undefined ? undefined : foods.get(ndb)
      if (food === undefined || !unit || !grams) continue
      food.portions.push({ amount: Number(amount) || 1, unit, grams: Number(grams) })
      portionCount++
    }
    progress(`${dataset.label}: WEIGHT.txt ${count(portionCount)} portions`)
  }
  const records: Array<FoodRecord> = []
  for (const [ndb, { fields, nutrients, portions }] of foods) {
    const per100g = toNutrition(nutrients)
    if (per100g === undefined) continue
    records.push({
      source: "sr28",
      sourceId: ndb,
      dataType: "sr28",
      description: fields[2] ?? "",
      foodGroup: groups.get(fields[1] ?? "") ?? null,
      commonNames: blankToNull(fields[4]),
      descriptors: descriptors.get(ndb) ?? null,
      manufacturer: blankToNull(fields[5]),
      surveyed: fields[6] === "Y",
      per100g,
      more: toMore(nutrients),
      portions
    })
  }
  return records
}

// ---------------------------------------------------------------------------------------------
// FoodData Central CSV: RFC 4180 with a header row; every field quoted.

type CsvRow = Readonly<Record<string, string | undefined>>

/** Rows of a FoodData Central CSV keyed by the header row (lower case); quoted fields may hold commas, quotes and line breaks. */
const csvRows = (stream: Readable) =>
  delimited<CsvRow>(stream, { bom: true, columns: (header: Array<string>) => header.map((name) => name.trim().toLowerCase()) })

/** The FoodData Central data types we load: generic foods, never the branded products. */
export const FDC_DATA_TYPES = ["foundation_food", "sr_legacy_food", "survey_fndds_food"] as const

/**
 * FoodData Central nutrient ids (nutrient.csv) of the nutrients served beside the four. Sugars: 2000 "Sugars, total
 * including NLEA" (SR Legacy, FNDDS) or 1063 "Sugars, Total" (Foundation), whichever the food has first.
 */
export const FDC_MORE: Record<string, MoreNutrient> = {
  "1079": "fiber_g",
  "2000": "sugars_g",
  "1063": "sugars_g",
  "1258": "saturated_fat_g",
  "1093": "sodium_mg",
  "1253": "cholesterol_mg",
  "1092": "potassium_mg",
  "1087": "calcium_mg",
  "1089": "iron_mg",
  "1162": "vitamin_c_mg"
}

const FDC_NUTRIENTS: Record<string, Macro> = {
  "1008": "kcal",
  "2048": "kcalAtwaterSpecific",
  "2047": "kcalAtwaterGeneral",
  "1003": "protein",
  "1004": "fat",
  "1005": "carbs"
}

/** Reads food.csv, food_nutrient.csv and food_portion.csv (plus the category and unit lookups when present). */
export const readFdc = async (dataset: Dataset, progress: Progress): Promise<ReadonlyArray<FoodRecord>> => {
  const wanted = new Set<string>(FDC_DATA_TYPES)
  const categories = new Map<string, string>()
  for (const [file, idColumn, nameColumn] of [
    ["food_category.csv", "id", "description"],
    ["wweia_food_category.csv", "wweia_food_category", "wweia_food_category_description"]
  ] as const) {
    const stream = await dataset.open(file)
    if (stream === undefined) continue
    for await (const row of csvRows(stream)) {
      const id = row[idColumn]
      const name = row[nameColumn]
      if (id && name) categories.set(id, name)
    }
  }
  const units = new Map<string, string>()
  const unitStream = await dataset.open("measure_unit.csv")
  if (unitStream !== undefined) {
    for await (const row of csvRows(unitStream)) units.set(row["id"] ?? "", row["name"] ?? "")
  }
  const foods = new Map<
    string,
    { dataType: string; description: string; category: string | null; nutrients: NutrientAccumulator; portions: Array<FoodPortion> }
  >()
  let foodRows = 0
  for await (const row of csvRows(await required(dataset, "food.csv"))) {
    foodRows++
    const dataType = row["data_type"] ?? ""
    const id = row["fdc_id"] ?? ""
    if (!wanted.has(dataType) || id === "") continue
    const categoryId = row["food_category_id"] ?? ""
    foods.set(id, {
      dataType,
      description: row["description"] ?? "",
      category: categories.get(categoryId) ?? null,
      nutrients: {},
      portions: []
    })
  }
  progress(`${dataset.label}: food.csv ${count(foodRows)} rows, ${count(foods.size)} generic foods`)
  let nutrientRows = 0
  const seen = () => {
    nutrientRows++
    if (nutrientRows % 500_000 === 0) progress(`${dataset.label}: food_nutrient.csv ${count(nutrientRows)} rows`)
  }
  const nutrientData = Readable.from(
    recordsMentioning(
      await required(dataset, "food_nutrient.csv"),
      { encoding: "utf8", quote: '"', header: true, needles: [...Object.keys(FDC_NUTRIENTS), ...Object.keys(FDC_MORE)] },
      seen
    )
  )
  for await (const row of csvRows(nutrientData)) {
    const key = FDC_NUTRIENTS[row["nutrient_id"] ?? ""]
    const more = FDC_MORE[row["nutrient_id"] ?? ""]
    if (key === undefined && more === undefined) continue
    const food = foods.get(row["fdc_id"] ?? "")
    const amount = row["amount"] ?? ""
    if (food === undefined || amount === "") continue
    if (key !== undefined) food.nutrients[key] = Number(amount)
    else if (more !== undefined) addMore(food.nutrients, more, Number(amount))
  }
  progress(`${dataset.label}: food_nutrient.csv ${count(nutrientRows)} rows`)
  const portionStream = await dataset.open("food_portion.csv")
  if (portionStream !== undefined) {
    let portions = 0
    for await (const row of csvRows(portionStream)) {
      const food = foods.get(row["fdc_id"] ?? "")
      const grams = Number(row["gram_weight"])
      if (food === undefined || !(grams > 0)) continue
      const unitName = units.get(row["measure_unit_id"] ?? "")
      const words = [unitName === "undetermined" ? "" : unitName, row["portion_description"], row["modifier"]]
        .map((w) => (w ?? "").trim())
        .filter((w) => w !== "" && w !== "Quantity not specified")
      food.portions.push({ amount: Number(row["amount"]) || 1, unit: words.join(", ") || "portion", grams })
      portions++
    }
    progress(`${dataset.label}: food_portion.csv ${count(portions)} portions`)
  }
  const records: Array<FoodRecord> = []
  for (const [id, food] of foods) {
    const per100g = toNutrition(food.nutrients)
    if (per100g === undefined) continue
    records.push({
      source: "fdc",
      sourceId: id,
      dataType: food.dataType,
      description: food.description,
      foodGroup: food.category,
      commonNames: null,
      descriptors: null,
      manufacturer: null,
      surveyed: food.dataType !== "sr_legacy_food",
      per100g,
      more: toMore(food.nutrients),
      portions: food.portions
    })
  }
  return records
}

/** Reads every download under a path (folder or zip) into records. */
export const readDatasets = async (path: string, progress: Progress) => {
  const out: Array<{ dataset: Dataset; records: ReadonlyArray<FoodRecord> }> = []
  for (const dataset of await locateDatasets(path)) {
    const records = dataset.kind === "sr28" ? await readSr28(dataset, progress) : await readFdc(dataset, progress)
    out.push({ dataset, records })
  }
  return out
}
