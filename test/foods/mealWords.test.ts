// CONTRACT "A meal in words", measured: meals as people write them (test/foods/meals/), read into foods and priced on
// the shipped SR28 copy, against the foods and grams a dietitian reads in them. Tuned on one half, reported on the other.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"
import { nutritionOf } from "../../src/foods/core/nutritionAnswer.ts"
import type { FoodRecord } from "../../src/foods/core/records.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { describeFigures, describeOutcome, figuresOf, type MealAnswer, type MealOutcome, outcomeOf } from "./meals/evaluate.ts"
import { readMeals, readPortions } from "./meals/mealSet.ts"

/**
 * The report half must do no worse than this: a little below what it measured (energy error 54.9 % of the mean,
 * carbohydrate 60.1 %, read whole 47.0 %, carbohydrate within ±7.5 g 39.9 %), so that a regression fails.
 */
const REPORT_FLOORS = { kcalShare: 0.58, carbsShare: 0.63, readWholeShare: 0.44, carbsWithinShare: 0.37 }

describe("meals in words on the shipped SR28 copy", () => {
  const records = shippedFoods()
  const byId: ReadonlyMap<string, FoodRecord> = new Map(records.map((r) => [r.sourceId, r]))
  const portions = readPortions()
  const tune = readMeals("tune", portions)
  const report = readMeals("report", portions)
  const foods = FoodDbMemory(records)

  /** Each meal's words sent as the body of POST /v1/nutrition is decoded: `{ text }`; a refusal is kept as its message. */
  const outcomesOf = (meals: typeof tune): Promise<ReadonlyArray<MealOutcome>> =>
    Effect.runPromise(
      Effect.forEach(meals, (meal) =>
        nutritionOf({ text: meal.text }).pipe(
          Effect.map((answer): MealAnswer | string => answer),
          Effect.catchAll((refused) => Effect.succeed(refused.error.message)),
          Effect.map((answer) => outcomeOf(meal, byId, answer))
        )
      ).pipe(Effect.provide(foods))
    )

  it("holds at least 300 meals with SR28 records, in two halves that share no words", () => {
    for (const meal of [...tune, ...report]) {
      expect(meal.foods.length, meal.text).toBeGreaterThan(0)
      for (const food of meal.foods) for (const c of food) expect(byId.has(c.ndb), `${meal.text}: ${c.ndb}`).toBe(true)
    }
    for (const [key, p] of portions) expect(byId.has(p.ndb), `portions.tsv ${key}: ${p.ndb}`).toBe(true)
    const tuned = new Set(tune.map((m) => m.text.toLowerCase()))
    expect(report.filter((m) => tuned.has(m.text.toLowerCase())).map((m) => m.text)).toEqual([])
    expect(tune.length + report.length).toBeGreaterThanOrEqual(300)
    expect(Math.min(tune.length, report.length)).toBeGreaterThanOrEqual(150)
  })

  it("prices the report half's meals within its floors", async () => {
    const tuned = await outcomesOf(tune)
    const reported = await outcomesOf(report)
    const t = figuresOf(tuned)
    const r = figuresOf(reported)
    console.log(`${describeFigures("tune", t)}\n${describeFigures("report", r)}`)
    if (process.env.MEALS_DETAIL === "tune") console.log(tuned.map(describeOutcome).join("\n"))
    expect(r.kcalShare).toBeLessThanOrEqual(REPORT_FLOORS.kcalShare)
    expect(r.carbsShare).toBeLessThanOrEqual(REPORT_FLOORS.carbsShare)
    expect(r.readWholeShare).toBeGreaterThanOrEqual(REPORT_FLOORS.readWholeShare)
    expect(r.carbsWithinShare).toBeGreaterThanOrEqual(REPORT_FLOORS.carbsWithinShare)
    // 377 meals of first-seen words: about 10 s on an idle machine, three times that with every core busy.
  }, 120_000)
})
