/** Scores a matcher on the dev set: per-food accuracy against the expected record and dish-level energy error. */
import { Option } from "effect"
import type { Nutrition } from "../../src/domain/schemas.ts"
import type { FoodMatch, FoodQuery } from "../../src/foods/FoodDb.ts"
import { DEV_DISHES, DEV_FOODS, type DevFood } from "./devset.ts"

export type Matcher = (query: FoodQuery) => Option.Option<FoodMatch>

/** A small seeded generator (mulberry32), so every run perturbs the guesses the same way. */
export const seededRandom = (seed: number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** A vision model's per-100 g guess: each value off by up to ±`spread` (0.4 = ±40 %). */
export const perturbedGuess = (food: DevFood, random: () => number, spread = 0.4): Nutrition => {
  const off = (value: number) => Math.max(0, value * (1 - spread + 2 * spread * random()))
  const [protein, carbs, fat] = food.macros
  return { kcal: off(food.kcal), protein_g: off(protein), carbs_g: off(carbs), fat_g: off(fat) }
}

export interface FoodOutcome {
  readonly food: DevFood
  readonly guess: Nutrition
  readonly match: Option.Option<FoodMatch>
  /** The match is the expected record's energy within 10 %, or (no record expected) there is no match. */
  readonly correct: boolean
}

export const evaluateFoods = (match: Matcher, rounds = 5, seed = 42) => {
  const random = seededRandom(seed)
  const outcomes: Array<FoodOutcome> = []
  for (let round = 0; round < rounds; round++) {
    for (const food of DEV_FOODS) {
      const guess = perturbedGuess(food, random)
      const result = match({ query: food.query, guessPer100g: guess })
      const correct =
        food.ndb === null
          ? Option.isNone(result)
          : Option.isSome(result) && Math.abs(result.value.per100g.kcal - food.kcal) <= 0.1 * Math.max(food.kcal, 1)
      outcomes.push({ food, guess, match: result, correct })
    }
  }
  const expected = outcomes.filter((o) => o.food.ndb !== null)
  return {
    outcomes,
    /** Share of foods with an expected record matched within 10 % of its kcal/100 g. */
    accuracy: expected.filter((o) => o.correct).length / expected.length,
    /** Share of foods with an expected record that got any match. */
    matchedShare: expected.filter((o) => Option.isSome(o.match)).length / expected.length,
    /** Share of foods without a fitting record that correctly stayed unmatched. */
    abstainedShare: outcomes.filter((o) => o.food.ndb === null && o.correct).length / Math.max(1, outcomes.filter((o) => o.food.ndb === null).length)
  }
}

/** Mean absolute error of dish energy: guesses alone versus guesses replaced by matches. */
export const evaluateDishes = (match: Matcher, rounds = 40, seed = 7) => {
  const random = seededRandom(seed)
  const byQuery = new Map(DEV_FOODS.map((food) => [food.query, food]))
  let guessError = 0
  let matchedError = 0
  let matchedGrams = 0
  let totalGrams = 0
  let dishes = 0
  for (let round = 0; round < rounds; round++) {
    for (const dish of DEV_DISHES) {
      let truth = 0
      let guessed = 0
      let matched = 0
      for (const [query, grams] of dish.ingredients) {
        const food = byQuery.get(query)
        if (food === undefined) throw new Error(`dish ingredient ${query} is not a dev food`)
        const guess = perturbedGuess(food, random)
        const result = match({ query, guessPer100g: guess })
        truth += (food.kcal * grams) / 100
        guessed += (guess.kcal * grams) / 100
        matched += (Option.match(result, { onNone: () => guess.kcal, onSome: (m) => m.per100g.kcal }) * grams) / 100
        totalGrams += grams
        if (Option.isSome(result)) matchedGrams += grams
      }
      guessError += Math.abs(guessed - truth) / truth
      matchedError += Math.abs(matched - truth) / truth
      dishes++
    }
  }
  return { guessOnly: guessError / dishes, matcher: matchedError / dishes, matchedGramShare: matchedGrams / totalGrams, dishes }
}
