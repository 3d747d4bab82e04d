/** Food matching benchmark: dev-set accuracy, match latency and dish-total errors (energy and macros) on the full SR28 set. */
import { Effect, Layer } from "effect"
import { embedded, layerFor } from "../src/db/Database.ts"
import { importFoods } from "../src/foods/importer.ts"
import { buildIndex, MATCHER_VERSION, matchIn } from "../src/foods/matcher.ts"
import { readDatasets } from "../src/foods/sources.ts"
import { DEV_DISHES, DEV_FOODS } from "../test/foods/devset.ts"
import { evaluateDishes, evaluateFoods, GUESS_ERROR, NUTRIENTS, perturbedGuess, seededRandom } from "../test/foods/evaluate.ts"
import { hasSr28, SR28_DIR } from "../test/foods/paths.ts"
import type { Benchmark } from "./run.ts"

const pct = (x: number) => `${(100 * x).toFixed(1)} %`

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

    const match = (query: Parameters<typeof matchIn>[1]) => matchIn(index, query)
    const foods = evaluateFoods(match, 10)
    console.log(`accuracy (the expected record, or one within 10 % on all four values): ${pct(foods.accuracy)}`)
    console.log(`matched share (foods with an expected record): ${pct(foods.matchedShare)}`)
    console.log(`correctly left unmatched (no fitting record): ${pct(foods.abstainedShare)}`)

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

    const dishes = evaluateDishes(match, 50)
    const label = { kcal: "energy", protein_g: "protein", carbs_g: "carbohydrate", fat_g: "fat" } as const
    console.log(`dish totals over ${dishes.dishes} dishes, mean absolute error in % of the true mean (guesses alone → matcher):`)
    for (const key of NUTRIENTS) console.log(`  ${label[key].padEnd(13)} ${pct(dishes.guessOnly[key]).padStart(7)} → ${pct(dishes.matcher[key]).padStart(7)}`)
    console.log(`grams matched to USDA: ${pct(dishes.matchedGramShare)}`)
  }
}
