/** Food matching benchmark: dev-set accuracy, match latency and dish-total errors (energy and macros) on the full SR28 set. */
import { Effect, Layer } from "effect"
import { embedded, layerFor } from "../src/db/Database.ts"
import { importFoods } from "../src/foods/core/importer.ts"
import { buildIndex, MATCHER_VERSION, matchIn } from "../src/foods/core/matcher.ts"
import { readDatasets } from "../src/foods/core/sources.ts"
import { DEV_DISHES, DEV_FOODS, type DevFood } from "../test/foods/devset.ts"
import {
  evaluateDishes,
  evaluateFoods,
  GUESS_ERROR,
  type GuessModel,
  HELD_OUT_FOODS,
  type Matcher,
  NUTRIENTS,
  nameCentredGuesses,
  perturbedGuess,
  RECORD_SHARE,
  TUNING_FOODS,
  typicalIn
} from "../test/foods/evaluate.ts"
import { seededRandom } from "../test/support/seeded.ts"
import { hasSr28, SR28_DIR } from "../test/foods/paths.ts"
import type { Benchmark } from "./run.ts"

const pct = (x: number) => `${(100 * x).toFixed(1)} %`

const LABEL = { kcal: "energy", protein_g: "protein", carbs_g: "carbohydrate", fat_g: "fat" } as const

/** Accuracy and dish totals of one part of the dev set, side by side with the guesses alone. */
const report = (title: string, match: Matcher, foods: ReadonlyArray<DevFood>, guesses: GuessModel = perturbedGuess) => {
  const outcome = evaluateFoods(match, 10, 42, foods, guesses)
  const dishes = evaluateDishes(match, 50, 7, foods, guesses)
  console.log(`${title}: ${foods.length} foods`)
  console.log(`  accuracy (the expected record, or one within 10 % on all four values): ${pct(outcome.accuracy)}`)
  console.log(`  matched share (foods with an expected record): ${pct(outcome.matchedShare)}; correctly left unmatched: ${pct(outcome.abstainedShare)}`)
  console.log(`  dish totals over ${dishes.dishes} dishes, mean absolute error in % of the true mean (guesses alone → matcher):`)
  for (const key of NUTRIENTS) console.log(`    ${LABEL[key].padEnd(13)} ${pct(dishes.guessOnly[key]).padStart(7)} → ${pct(dishes.matcher[key]).padStart(7)}`)
  console.log(`  grams matched to USDA: ${pct(dishes.matchedGramShare)} (of foods SR28 has a record for: ${pct(dishes.matchedFittingGramShare)})`)
}

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN

/** Import of the full SR28 set into a fresh in-memory PGlite, as `morsel fooddb import` does. */
const timeImport = () =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const db = yield* Layer.build(Layer.unwrapScoped(Effect.map(embedded("memory://"), layerFor)))
        return yield* importFoods(SR28_DIR, { progress: () => {} }).pipe(Effect.provide(db))
      })
    )
  )

export const foodsBenchmark: Benchmark = {
  name: "foods",
  run: async () => {
    if (!hasSr28) {
      console.log(`skipped: no USDA SR28 data at ${SR28_DIR}`)
      return
    }
    console.log(`matcher ${MATCHER_VERSION}; dev set ${DEV_FOODS.length} foods, ${DEV_DISHES.length} dishes; guesses off by ${100 * GUESS_ERROR.low} % to +${100 * GUESS_ERROR.high} % per nutrient`)
    let t = performance.now()
    const [sr28] = await readDatasets(SR28_DIR, () => {})
    const records = sr28!.records
    const readMs = performance.now() - t
    t = performance.now()
    const index = buildIndex(records)
    console.log(`SR28: ${records.length} foods read in ${readMs.toFixed(0)} ms, index built in ${(performance.now() - t).toFixed(0)} ms`)
    const imported = await timeImport()
    console.log(`import into PGlite (in memory): ${imported.foods} foods, ${imported.portions} portions in ${(imported.elapsedMs / 1000).toFixed(1)} s`)

    const match: Matcher = (query) => matchIn(index, query)
    report("tuned on (four fifths of the dev set)", match, TUNING_FOODS)
    report("held out (the fifth never tuned on; these figures count)", match, HELD_OUT_FOODS)
    const named = nameCentredGuesses(typicalIn(index))
    console.log(`guesses centred ${100 * RECORD_SHARE} % on the record and ${100 * (1 - RECORD_SHARE)} % on what the name means in general (as a model's are):`)
    report("tuned on, name-centred guesses", match, TUNING_FOODS, named)
    report("held out, name-centred guesses (the figures to compare with dishes never seen)", match, HELD_OUT_FOODS, named)

    // Latency: every dev query with a perturbed guess, after a warm-up round.
    const random = seededRandom(99)
    const queries = Array.from({ length: 20 }, () => DEV_FOODS.map((food) => ({ query: food.query, guessPer100g: perturbedGuess(food, random) }))).flat()
    for (const q of queries.slice(0, DEV_FOODS.length)) match(q)
    const times = queries.map((q) => {
      const start = performance.now()
      match(q)
      return performance.now() - start
    })
    times.sort((a, b) => a - b)
    console.log(`match time over ${times.length} queries: median ${quantile(times, 0.5).toFixed(3)} ms, p95 ${quantile(times, 0.95).toFixed(3)} ms`)
  }
}
