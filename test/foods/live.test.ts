import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted, TestClock } from "effect"
import { FoodDb, type FoodQuery } from "../../src/foods/core/FoodDb.ts"
import { makeFoodDbLive } from "../../src/foods/core/FoodDbLive.ts"
import { importFoods } from "../../src/foods/core/importer.ts"
import { TestDatabase } from "../support/database.ts"
import { fakeFdc } from "../support/fakeFdc.ts"
import { FDC_FIXTURE_DIR } from "./paths.ts"

const quiet = { progress: () => {} }

/** A model's guess: energy and the three macros (protein, carbohydrate, fat), all of which a match must agree with. */
const query = (text: string, kcal: number, [protein_g, carbs_g, fat_g]: readonly [number, number, number] = [5, 20, 5]): FoodQuery => ({
  query: text,
  guessPer100g: { kcal, protein_g, carbs_g, fat_g }
})
const RICE = [2.7, 28, 0.3] as const

/** Lets the index's refresh fiber finish its database round trip (I/O, not time: the clock itself is the TestClock). */
const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

const until = <A>(check: Effect.Effect<A>, done: (a: A) => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 5000; i++) {
      const value = yield* check
      if (done(value)) return value
      yield* settle
    }
    return yield* check
  })

const fdcIdOf = (m: Option.Option<{ readonly fdcId: string }>) => Option.map(m, (x) => x.fdcId)

describe("FoodDbLive", () => {
  it.layer(TestDatabase, { timeout: 60_000 })("index held warm and reloaded after an import", (it) => {
    it.scoped("matches from the records in PostgreSQL and picks up a later import on its next refresh", () =>
      Effect.gen(function* () {
        const foods = Context.get(yield* Layer.build(makeFoodDbLive({ refresh: "30 seconds" })), FoodDb)
        expect(foods.matcherVersion).toMatch(/^usda-match-\d+$/)
        expect(yield* foods.match(query("white rice", 140, RICE))).toEqual(Option.none())

        yield* importFoods(FDC_FIXTURE_DIR, quiet)
        // Not before the refresh interval has passed on the clock...
        expect(yield* foods.match(query("white rice", 140, RICE))).toEqual(Option.none())
        yield* TestClock.adjust("30 seconds")
        const rice = yield* until(foods.match(query("white rice", 140, RICE)), Option.isSome)
        expect(Option.map(rice, (m) => [m.fdcId, m.name, m.per100g.kcal])).toEqual(
          Option.some(["169756", "Rice, white, long-grain, regular, enriched, cooked", 130])
        )
        // Foundation hummus carries Atwater energy only; the match reports it.
        expect(Option.map(yield* foods.match(query("hummus", 200, [7, 15, 16])), (m) => m.per100g.kcal)).toEqual(Option.some(229))
        // The guess disagrees with every candidate: no match, the item stays `ai`.
        expect(yield* foods.match(query("white rice", 900, RICE))).toEqual(Option.none())
      }))
  })

  it.layer(TestDatabase, { timeout: 60_000 })("live FoodData Central API (FDC_API_KEY set)", (it) => {
    const FAKE_FOODS = [
      { fdcId: 2706370, description: "Chicken tikka masala", dataType: "Survey (FNDDS)", kcal: 148, protein: 12.1, fat: 8.3, carbs: 6.2 },
      { fdcId: 2708500, description: "Pad thai with chicken", dataType: "Survey (FNDDS)", kcal: 172, protein: 8.9, fat: 6.1, carbs: 20.4 },
      { fdcId: 2708600, description: "Sushi roll, california", dataType: "Survey (FNDDS)", kcal: 146, protein: 3.9, fat: 3.5, carbs: 24.7 },
      { fdcId: 2708700, description: "Ramen noodle soup, prepared", dataType: "Survey (FNDDS)", kcal: 62, protein: 1.9, fat: 2.6, carbs: 8.1 }
    ] as const

    it.scoped("asks the API for what local data cannot answer, caches the answer, respects the hourly budget and 429s", () =>
      Effect.gen(function* () {
        const fake = yield* fakeFdc("fdc-test-key", FAKE_FOODS)
        const layer = makeFoodDbLive({ fdcApi: { apiKey: Redacted.make("fdc-test-key"), baseUrl: fake.baseUrl, requestsPerHour: 2 } })
        const foods = Context.get(yield* Layer.build(layer), FoodDb)
        expect(foods.matcherVersion).toMatch(/\+fdc-api$/)

        const tikka = yield* foods.match(query("chicken tikka masala", 160, [12, 7, 8]))
        expect(Option.map(tikka, (m) => [m.fdcId, m.name, m.per100g])).toEqual(
          Option.some(["2706370", "Chicken tikka masala", { kcal: 148, protein_g: 12.1, carbs_g: 6.2, fat_g: 8.3 }])
        )
        // The same query again comes from the database cache, not the API.
        expect(fdcIdOf(yield* foods.match(query("Chicken tikka  masala", 160, [12, 7, 8])))).toEqual(Option.some("2706370"))
        expect(fake.queries).toEqual(["chicken tikka masala"])
        const sql = yield* SqlClient.SqlClient
        // Every hit of the search is cached (the fake also finds "Pad thai with chicken" for "chicken").
        expect(yield* sql`SELECT source_id FROM foods WHERE source = 'fdc_api' ORDER BY source_id`).toEqual([
          { source_id: "2706370" },
          { source_id: "2708500" }
        ])

        // Second request of the hour: allowed. Third: over the budget, so no call and no match.
        expect(fdcIdOf(yield* foods.match(query("pad thai", 170)))).toEqual(Option.some("2708500"))
        expect(yield* foods.match(query("sushi roll", 150))).toEqual(Option.none())
        expect(fake.queries).toEqual(["chicken tikka masala", "pad thai"])
        yield* TestClock.adjust("61 minutes")
        expect(fdcIdOf(yield* foods.match(query("sushi roll", 150)))).toEqual(Option.some("2708600"))

        // A 429 pauses the API for its Retry-After.
        fake.refuseWith429(120)
        yield* TestClock.adjust("61 minutes")
        expect(yield* foods.match(query("ramen", 60))).toEqual(Option.none())
        expect(yield* foods.match(query("ramen soup", 60))).toEqual(Option.none())
        expect(fake.queries).toEqual(["chicken tikka masala", "pad thai", "sushi roll", "ramen"])
        yield* TestClock.adjust("121 seconds")
        yield* foods.match(query("ramen soup", 60))
        expect(fake.queries.length).toBe(5)
      }))

    it.scoped("an API answer that disagrees with the guess is not trusted either", () =>
      Effect.gen(function* () {
        const fake = yield* fakeFdc("fdc-test-key", FAKE_FOODS)
        const layer = makeFoodDbLive({ fdcApi: { apiKey: Redacted.make("fdc-test-key"), baseUrl: fake.baseUrl } })
        const foods = Context.get(yield* Layer.build(layer), FoodDb)
        expect(yield* foods.match(query("pad thai", 600))).toEqual(Option.none())
      }))

    it.scoped("a wrong key or an unreachable API leaves the item unmatched, never failing the analysis", () =>
      Effect.gen(function* () {
        const fake = yield* fakeFdc("the-right-key", FAKE_FOODS)
        const wrongKey = Context.get(
          yield* Layer.build(makeFoodDbLive({ fdcApi: { apiKey: Redacted.make("a-wrong-key"), baseUrl: fake.baseUrl } })),
          FoodDb
        )
        expect(yield* wrongKey.match(query("pad thai with chicken", 170))).toEqual(Option.none())
        const unreachable = Context.get(
          yield* Layer.build(makeFoodDbLive({ fdcApi: { apiKey: Redacted.make("k"), baseUrl: "http://127.0.0.1:9" } })),
          FoodDb
        )
        expect(yield* unreachable.match(query("pad thai with chicken", 170))).toEqual(Option.none())
      }))
  })
})
