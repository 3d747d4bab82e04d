// The scripted vision model: the same image always shows the same meal, every meal is matched in the shipped USDA
// subset, and queued steps replace the image's meal for tests.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option, Schema, TestClock } from "effect"
import { type ModelAnswer, ModelAnswerSchema, VisionModel, type VisionInput } from "../../src/analysis/VisionModel.ts"
import { answerFor, mealOf, SANDBOX_MEALS, ScriptStep, VisionModelScripted, VisionScript } from "../../src/analysis/VisionModelScripted.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"

const image = (seed: number) => Uint8Array.from({ length: 64 }, (_, i) => (i * 31 + seed * 7) % 256)
const input = (seed: number, language: "en" | "lt" = "en"): VisionInput => ({ image: image(seed), mime: "image/jpeg", language })

describe("scripted vision model", () => {
  it.effect("gives the same image the same meal, call after call and model after model", () =>
    Effect.gen(function* () {
      const twice = Effect.gen(function* () {
        const model = yield* VisionModel
        return [yield* model.analyze(input(1)), yield* model.analyze(input(1))]
      })
      const [first, second] = yield* twice.pipe(Effect.provide(VisionModelScripted))
      const [third] = yield* twice.pipe(Effect.provide(VisionModelScripted))
      expect(second).toEqual(first)
      expect(third).toEqual(first)
      expect(first?.food_detected).toBe(true)
      expect((yield* VisionModel.pipe(Effect.provide(VisionModelScripted))).model).toBe("sandbox")
    })
  )

  it("spreads images over many meals, names them in the requested language, and answers by the model's rules", () => {
    const dishes = new Set(Array.from({ length: 200 }, (_, seed) => mealOf(image(seed)).dish.en))
    expect(dishes.size).toBeGreaterThan(SANDBOX_MEALS.length / 2)
    const en = answerFor(input(3, "en"))
    const lt = answerFor(input(3, "lt"))
    expect(lt.dish_name).not.toBe(en.dish_name)
    expect(lt.dish_name).toBe(mealOf(image(3)).dish.lt)
    expect(lt.items.map((item) => item.query)).toEqual(en.items.map((item) => item.query))
    for (const seed of [0, 1, 2, 3, 4, 5]) {
      expect(Schema.decodeUnknownEither(ModelAnswerSchema)(answerFor(input(seed, "lt")))._tag).toBe("Right")
    }
  })

  it.effect("finds every component of every sandbox meal in the shipped copy of SR28", () =>
    Effect.gen(function* () {
      const foods = yield* FoodDb
      const unmatched: Array<string> = []
      for (const meal of SANDBOX_MEALS) {
        for (const item of meal.items) {
          const [kcal, protein_g, carbs_g, fat_g] = item.per100
          const match = yield* foods.match({ query: item.query, guessPer100g: { kcal, protein_g, carbs_g, fat_g } })
          if (Option.isNone(match)) unmatched.push(item.query)
        }
      }
      expect(unmatched).toEqual([])
    }).pipe(Effect.provide(FoodDbMemory(shippedFoods())))
  )

  it.effect("takes queued answers and failures in order, then returns to the image's meal", () =>
    Effect.gen(function* () {
      const model = yield* VisionModel
      const script = yield* VisionScript
      const custom: ModelAnswer = { food_detected: true, dish_name: "Toast", items: [{ name: "Toast", query: "toast", estimated_grams: 30, confidence: 0.9, per_100g: { kcal: 290, protein_g: 9, carbs_g: 53, fat_g: 4 } }] }
      yield* script.enqueue(ScriptStep.answer(custom), ScriptStep.noFood(), ScriptStep.fail("provider_error"))
      expect(yield* model.analyze(input(7))).toEqual(custom)
      expect((yield* model.analyze(input(7))).food_detected).toBe(false)
      const failed = yield* Effect.exit(model.analyze(input(7)))
      expect(Exit.isFailure(failed) && failed.cause._tag === "Fail" ? failed.cause.error.reason : undefined).toBe("provider_error")
      expect(yield* model.analyze(input(7))).toEqual(answerFor(input(7)))
      expect((yield* script.calls).length).toBe(4)
    }).pipe(Effect.provide(VisionModelScripted))
  )

  it.effect("a hanging step never answers, so the analysis deadline decides", () =>
    Effect.gen(function* () {
      const model = yield* VisionModel
      yield* (yield* VisionScript).enqueue(ScriptStep.hang())
      const waiting = yield* model.analyze(input(8)).pipe(Effect.timeout("45 seconds"), Effect.option, Effect.fork)
      yield* TestClock.adjust("45 seconds")
      expect(yield* Fiber.join(waiting)).toEqual(Option.none())
    }).pipe(Effect.provide(VisionModelScripted))
  )
})
