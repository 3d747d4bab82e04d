/**
 * Writes commonFoods.json, the small public-domain USDA subset the sandbox loads: the everyday (survey) foods of
 * SR28 without portions. Run: `npx tsx src/foods/commonFoods.generate.ts <folder holding the SR28 ASCII files>`.
 */
import { writeFile } from "node:fs/promises"
import { join } from "node:path"
import { COMMON_FOODS_COLUMNS, type CommonFoods } from "./commonFoods.ts"
import { locateDatasets, readSr28 } from "./sources.ts"

/** Groups an integrator photographs rarely or that SR28 repeats under other groups. */
const LEFT_OUT = new Set(["Baby Foods", "American Indian/Alaska Native Foods", "Restaurant Foods"])

const round = (n: number) => Math.round(n * 100) / 100

const main = async (folder: string | undefined) => {
  if (folder === undefined) throw new Error("usage: commonFoods.generate.ts <SR28 folder>")
  const [dataset] = (await locateDatasets(folder)).filter((d) => d.kind === "sr28")
  if (dataset === undefined) throw new Error(`no SR28 files in ${folder}`)
  const records = await readSr28(dataset, () => undefined)
  const kept = records.filter((r) => r.surveyed && r.manufacturer === null && !LEFT_OUT.has(r.foodGroup ?? ""))
  const data: CommonFoods = {
    source:
      "USDA National Nutrient Database for Standard Reference, Release 28 (US Government work, public domain): foods flagged for dietary surveys",
    columns: COMMON_FOODS_COLUMNS,
    foods: kept.map((r) =>
      [r.sourceId, r.foodGroup ?? "", r.description, r.commonNames ?? "", r.per100g.kcal, r.per100g.protein_g, r.per100g.carbs_g, r.per100g.fat_g, r.descriptors ?? ""]
        .map((v) => (typeof v === "number" ? String(round(v)) : v.replaceAll("\t", " ")))
        .join("\t")
    )
  }
  const target = join(import.meta.dirname, "commonFoods.json")
  // One food per line, so a regenerated file diffs food by food.
  const text = `{"source": ${JSON.stringify(data.source)},\n"columns": ${JSON.stringify(data.columns)},\n"foods": [\n${data.foods.map((f) => JSON.stringify(f)).join(",\n")}\n]}\n`
  await writeFile(target, text)
  console.log(`${kept.length} of ${records.length} foods, ${text.length} bytes → ${target}`)
}

await main(process.argv[2])
