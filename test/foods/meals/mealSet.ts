/**
 * The meal dev set: meals in everyday words (tune.txt, report.txt) with the foods a dietitian reads in them, each
 * food as SR28 records and grams (portions.tsv names the usual ones), from which true energy and carbohydrate follow.
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import type { FoodRecord } from "../../../src/foods/core/records.ts"

export type Half = "tune" | "report"

export interface Component {
  /** The SR28 NDB number. */
  readonly ndb: string
  readonly grams: number
}

export interface Meal {
  readonly half: Half
  /** The words as a person wrote them (lines joined by "\n"). */
  readonly text: string
  /** One entry per food the words name, each the records and grams it stands for. */
  readonly foods: ReadonlyArray<ReadonlyArray<Component>>
}

export interface Truth {
  readonly kcal: number
  readonly carbs: number
}

const fileText = (name: string) => readFileSync(fileURLToPath(new URL(name, import.meta.url)), "utf8")

/** portions.tsv: key, NDB number, grams of one, and the words it stands for; `#` lines are comments. */
export const readPortions = (): ReadonlyMap<string, Component> => {
  const portions = new Map<string, Component>()
  for (const line of fileText("portions.tsv").split("\n")) {
    if (line.trim() === "" || line.startsWith("#")) continue
    const [key = "", ndb = "", grams = ""] = line.split("\t")
    if (portions.has(key)) throw new Error(`portions.tsv: ${key} twice`)
    portions.set(key, { ndb, grams: Number(grams) })
  }
  return portions
}

/** One component: `key`, `key*N` (N of them), `key@G` or `NDB@G` (G grams of its record). */
const componentOf = (portions: ReadonlyMap<string, Component>, written: string): Component => {
  const match = /^([\w.]+)(?:\*([\d.]+)|@([\d.]+))?$/.exec(written.trim())
  if (match === null) throw new Error(`not a component: ${JSON.stringify(written)}`)
  const [, key = "", times, grams] = match
  const portion = portions.get(key)
  if (portion !== undefined) return { ndb: portion.ndb, grams: grams !== undefined ? Number(grams) : portion.grams * Number(times ?? 1) }
  if (/^\d{5}$/.test(key) && grams !== undefined) return { ndb: key, grams: Number(grams) }
  throw new Error(`unknown component: ${JSON.stringify(written)}`)
}

/** A half's meals: "> " lines are the words (several make one text of lines), the "= " line after them the truth. */
export const readMeals = (half: Half, portions: ReadonlyMap<string, Component> = readPortions()): ReadonlyArray<Meal> => {
  const meals: Array<Meal> = []
  let lines: Array<string> = []
  for (const line of fileText(`${half}.txt`).split("\n")) {
    if (line.startsWith("> ")) lines.push(line.slice(2))
    else if (line.startsWith("= ")) {
      if (lines.length === 0) throw new Error(`${half}.txt: a truth without words: ${line}`)
      const foods = line
        .slice(2)
        .split("|")
        .map((food) => food.split("+").map((c) => componentOf(portions, c)))
      meals.push({ half, text: lines.join("\n"), foods })
      lines = []
    }
  }
  if (lines.length > 0) throw new Error(`${half}.txt: words without a truth at the end`)
  return meals
}

/** A meal's true energy and carbohydrate from SR28's per-100 g values of its records. */
export const truthOf = (meal: Meal, records: ReadonlyMap<string, FoodRecord>): Truth => {
  let kcal = 0
  let carbs = 0
  for (const food of meal.foods) {
    for (const { ndb, grams } of food) {
      const record = records.get(ndb)
      if (record === undefined) throw new Error(`${JSON.stringify(meal.text)}: no SR28 record ${ndb}`)
      kcal += (record.per100g.kcal * grams) / 100
      carbs += (record.per100g.carbs_g * grams) / 100
    }
  }
  return { kcal, carbs }
}
