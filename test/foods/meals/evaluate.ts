/**
 * Scores the reading of meals in words on the meal dev set: per meal, the energy and carbohydrate the answer totals
 * against the truth, whether every food was read (complete, and as many foods as the words name), and whether the
 * carbohydrates land within ±7.5 g, the margin a person dosing insulin by carbohydrate counting works to.
 */
import { medianOf } from "../../../src/foods/core/generic.ts"
import type { FoodRecord } from "../../../src/foods/core/records.ts"
import { type Meal, type Truth, truthOf } from "./mealSet.ts"

/** What the evaluation needs of an answer of POST /v1/nutrition with `text` (NutritionResult has these fields). */
export interface MealAnswer {
  readonly items: ReadonlyArray<{ readonly query: string; readonly matched_name: string; readonly grams: number; readonly text?: string }>
  readonly totals: { readonly kcal: number; readonly carbs_g: number }
  readonly complete: boolean
  readonly unmatched: ReadonlyArray<{ readonly query: string }>
}

export const CARBS_MARGIN_G = 7.5

export interface MealOutcome {
  readonly meal: Meal
  readonly truth: Truth
  /** The answer, or the refusal's message when the text was refused. */
  readonly answer: MealAnswer | string
  readonly kcal: number
  readonly carbs: number
  /** complete, and the answer read as many foods as the words name. */
  readonly readWhole: boolean
}

export interface MealFigures {
  readonly meals: number
  readonly meanKcal: number
  readonly meanCarbs: number
  /** Mean absolute error per meal, and as a share of the mean true value. */
  readonly kcalMae: number
  readonly kcalShare: number
  readonly carbsMae: number
  readonly carbsShare: number
  /** Mean signed error (answer − truth) as a share of the mean: below 0, the reading prices meals too low. */
  readonly kcalBias: number
  readonly carbsBias: number
  /** The median absolute error per meal: what a typical meal is off by, outliers aside. */
  readonly kcalMedian: number
  readonly carbsMedian: number
  readonly readWholeShare: number
  readonly carbsWithinShare: number
  readonly refused: number
}

/** A meal's outcome from the answer to its words (or the refusal's message). */
export const outcomeOf = (meal: Meal, records: ReadonlyMap<string, FoodRecord>, answer: MealAnswer | string): MealOutcome => {
  const truth = truthOf(meal, records)
  if (typeof answer === "string") return { meal, truth, answer, kcal: 0, carbs: 0, readWhole: false }
  const read = answer.items.length + answer.unmatched.length
  return { meal, truth, answer, kcal: answer.totals.kcal, carbs: answer.totals.carbs_g, readWhole: answer.complete && read === meal.foods.length }
}

export const figuresOf = (outcomes: ReadonlyArray<MealOutcome>): MealFigures => {
  const n = outcomes.length
  const sum = (f: (o: MealOutcome) => number) => outcomes.reduce((total, o) => total + f(o), 0)
  const meanKcal = sum((o) => o.truth.kcal) / n
  const meanCarbs = sum((o) => o.truth.carbs) / n
  const kcalMae = sum((o) => Math.abs(o.kcal - o.truth.kcal)) / n
  const carbsMae = sum((o) => Math.abs(o.carbs - o.truth.carbs)) / n
  return {
    meals: n,
    meanKcal,
    meanCarbs,
    kcalMae,
    kcalShare: kcalMae / meanKcal,
    carbsMae,
    carbsShare: carbsMae / meanCarbs,
    kcalBias: sum((o) => o.kcal - o.truth.kcal) / n / meanKcal,
    carbsBias: sum((o) => o.carbs - o.truth.carbs) / n / meanCarbs,
    kcalMedian: medianOf(outcomes.map((o) => Math.abs(o.kcal - o.truth.kcal))),
    carbsMedian: medianOf(outcomes.map((o) => Math.abs(o.carbs - o.truth.carbs))),
    readWholeShare: outcomes.filter((o) => o.readWhole).length / n,
    carbsWithinShare: outcomes.filter((o) => Math.abs(o.carbs - o.truth.carbs) <= CARBS_MARGIN_G).length / n,
    refused: outcomes.filter((o) => typeof o.answer === "string").length
  }
}

const pct = (share: number) => `${(100 * share).toFixed(1)} %`

export const describeFigures = (label: string, f: MealFigures) =>
  `${label}: ${f.meals} meals (mean ${f.meanKcal.toFixed(0)} kcal, ${f.meanCarbs.toFixed(1)} g carbohydrate): ` +
  `energy error ${f.kcalMae.toFixed(0)} kcal a meal (${pct(f.kcalShare)} of the mean, bias ${pct(f.kcalBias)}, median ${f.kcalMedian.toFixed(0)} kcal), ` +
  `carbohydrate error ${f.carbsMae.toFixed(1)} g (${pct(f.carbsShare)}, bias ${pct(f.carbsBias)}, median ${f.carbsMedian.toFixed(1)} g); ` +
  `read whole ${pct(f.readWholeShare)}, carbohydrate within ±${CARBS_MARGIN_G} g ${pct(f.carbsWithinShare)}` +
  (f.refused > 0 ? `, refused ${f.refused}` : "")

/** One line a meal: its words, what was read and priced, and how far it landed from the truth. */
export const describeOutcome = (o: MealOutcome) => {
  const words = JSON.stringify(o.meal.text)
  const off = `${(o.kcal - o.truth.kcal).toFixed(0)} kcal, ${(o.carbs - o.truth.carbs).toFixed(1)} g carbs (truth ${o.truth.kcal.toFixed(0)} kcal, ${o.truth.carbs.toFixed(1)} g; ${o.meal.foods.length} foods)`
  if (typeof o.answer === "string") return `${words}: refused: ${o.answer}`
  const items = o.answer.items.map((i) => `${JSON.stringify(i.text ?? i.query)} → ${i.matched_name} ${i.grams} g`)
  const unmatched = o.answer.unmatched.map((u) => `${JSON.stringify(u.query)} unmatched`)
  return `${words}: ${off}\n    ${[...items, ...unmatched].join("\n    ")}`
}
