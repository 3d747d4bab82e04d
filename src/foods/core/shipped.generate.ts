/**
 * Writes data/sr28.tsv.gz, the copy of USDA SR28 the service ships: all its foods with the served nutrients, their
 * LanguaL descriptors and household portions (WEIGHT.txt). Reproducible: the same USDA files give the same bytes.
 * Run: `npx tsx src/foods/core/shipped.generate.ts <folder holding the SR28 ASCII files>`.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { gzipSync } from "node:zlib"
import { MORE_NUTRIENTS } from "./records.ts"
import { SHIPPED_COLUMNS, SHIPPED_FILE } from "./shipped.ts"
import { locateDatasets, readSr28 } from "./sources.ts"

export const CITATION =
  "US Department of Agriculture, Agricultural Research Service, Nutrient Data Laboratory. USDA National Nutrient Database for Standard Reference, Release 28 (Slightly revised). Version Current: May 2016. http://www.ars.usda.gov/nea/bhnrc/mafcl (public domain)"

/** Four significant decimals at most: what SR28 itself gives. */
const number = (n: number) => String(Math.round(n * 10000) / 10000)
const text = (s: string | null) => (s ?? "").replace(/[\t\n;|]/g, " ")

const main = async (folder: string | undefined) => {
  if (folder === undefined) throw new Error("usage: shipped.generate.ts <SR28 folder>")
  const [dataset] = (await locateDatasets(folder)).filter((d) => d.kind === "sr28")
  if (dataset === undefined) throw new Error(`no SR28 files in ${folder}`)
  const records = [...(await readSr28(dataset, () => undefined))].sort((a, b) => a.sourceId.localeCompare(b.sourceId))
  const lines = records.map((r) =>
    [
      r.sourceId,
      text(r.foodGroup),
      text(r.description),
      text(r.commonNames),
      text(r.manufacturer),
      r.surveyed ? "Y" : "",
      number(r.per100g.kcal),
      number(r.per100g.protein_g),
      number(r.per100g.carbs_g),
      number(r.per100g.fat_g),
      ...MORE_NUTRIENTS.map((key) => {
        const value = r.more?.[key]
        return value === null || value === undefined ? "" : number(value)
      }),
      text(r.descriptors),
      r.portions.map((p) => `${number(p.amount)}|${text(p.unit)}|${number(p.grams)}`).join(";")
    ].join("\t")
  )
  const header = [`# ${CITATION}`, `# ${SHIPPED_COLUMNS.join("\t")}`]
  // mtime 0 and no file name in the gzip header: the same input gives the same bytes.
  const gz = gzipSync(`${[...header, ...lines].join("\n")}\n`, { level: 9 })
  const target = join(import.meta.dirname, "data", SHIPPED_FILE)
  writeFileSync(target, gz)
  console.log(`${records.length} foods, ${records.reduce((n, r) => n + r.portions.length, 0)} portions, ${gz.length} bytes → ${target}`)
}

await main(process.argv[2])
