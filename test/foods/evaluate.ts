/** Scores a matcher on the dev set: per-food accuracy against the expected record, and dish-total errors for energy and each macro. */
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

/** How far a vision model's per-100 g guesses stray: each nutrient independently between −35 % and +45 %. */
export const GUESS_ERROR = { low: -0.35, high: 0.45 } as const

export const NUTRIENTS = ["kcal", "protein_g", "carbs_g", "fat_g"] as const satisfies ReadonlyArray<keyof Nutrition>
export type NutrientKey = (typeof NUTRIENTS)[number]

/** The expected food's true per-100 g values. */
export const truthOf = (food: DevFood): Nutrition => {
  const [protein_g, carbs_g, fat_g] = food.macros
  return { kcal: food.kcal, protein_g, carbs_g, fat_g }
}

/** A vision model's per-100 g guess: each of the four values off by its own factor within GUESS_ERROR. */
export const perturbedGuess = (food: DevFood, random: () => number): Nutrition => {
  const truth = truthOf(food)
  const off = (value: number) => value * (1 + GUESS_ERROR.low + (GUESS_ERROR.high - GUESS_ERROR.low) * random())
  return { kcal: off(truth.kcal), protein_g: off(truth.protein_g), carbs_g: off(truth.carbs_g), fat_g: off(truth.fat_g) }
}

export interface FoodOutcome {
  readonly food: DevFood
  readonly guess: Nutrition
  readonly match: Option.Option<FoodMatch>
  /** The match is the expected record (or, no record expected, there is no match). */
  readonly correct: boolean
}

/** A match counts as right when it is the expected record, or another whose four values are as close (within 10 % or 1.5 g). */
const sameFood = (match: FoodMatch, food: DevFood) => {
  if (match.fdcId === food.ndb) return true
  const truth = truthOf(food)
  return NUTRIENTS.every((key) => Math.abs(match.per100g[key] - truth[key]) <= Math.max(0.1 * truth[key], key === "kcal" ? 5 : 1.5))
}

export const evaluateFoods = (match: Matcher, rounds = 5, seed = 42) => {
  const random = seededRandom(seed)
  const outcomes: Array<FoodOutcome> = []
  for (let round = 0; round < rounds; round++) {
    for (const food of DEV_FOODS) {
      const guess = perturbedGuess(food, random)
      const result = match({ query: food.query, guessPer100g: guess })
      const correct = food.ndb === null ? Option.isNone(result) : Option.isSome(result) && sameFood(result.value, food)
      outcomes.push({ food, guess, match: result, correct })
    }
  }
  const expected = outcomes.filter((o) => o.food.ndb !== null)
  const unexpected = outcomes.filter((o) => o.food.ndb === null)
  return {
    outcomes,
    /** Share of foods with an expected record matched to it (or to one with the same values). */
    accuracy: expected.filter((o) => o.correct).length / expected.length,
    /** Share of foods with an expected record that got any match. */
    matchedShare: expected.filter((o) => Option.isSome(o.match)).length / expected.length,
    /** Share of foods without a fitting record that correctly stayed unmatched. */
    abstainedShare: unexpected.filter((o) => o.correct).length / Math.max(1, unexpected.length)
  }
}

type PerNutrient = Readonly<Record<NutrientKey, number>>
const zeros = (): Record<NutrientKey, number> => ({ kcal: 0, protein_g: 0, carbs_g: 0, fat_g: 0 })

/**
 * Dish totals with guesses alone versus guesses replaced by matches: mean absolute error of each nutrient's dish
 * total, as a share of the mean true total, and the share of grams matched to a record.
 */
export const evaluateDishes = (match: Matcher, rounds = 40, seed = 7) => {
  const random = seededRandom(seed)
  const byQuery = new Map(DEV_FOODS.map((food) => [food.query, food]))
  const truthSum = zeros()
  const guessError = zeros()
  const matchedError = zeros()
  let matchedGrams = 0
  let totalGrams = 0
  let dishes = 0
  for (let round = 0; round < rounds; round++) {
    for (const dish of DEV_DISHES) {
      const truth = zeros()
      const guessed = zeros()
      const matched = zeros()
      for (const [query, grams] of dish.ingredients) {
        const food = byQuery.get(query)
        if (food === undefined) throw new Error(`dish ingredient ${query} is not a dev food`)
        const guess = perturbedGuess(food, random)
        const result = match({ query, guessPer100g: guess })
        const used = Option.match(result, { onNone: () => guess, onSome: (m) => m.per100g })
        const real = truthOf(food)
        for (const key of NUTRIENTS) {
          truth[key] += (real[key] * grams) / 100
          guessed[key] += (guess[key] * grams) / 100
          matched[key] += (used[key] * grams) / 100
        }
        totalGrams += grams
        if (Option.isSome(result)) matchedGrams += grams
      }
      for (const key of NUTRIENTS) {
        truthSum[key] += truth[key]
        guessError[key] += Math.abs(guessed[key] - truth[key])
        matchedError[key] += Math.abs(matched[key] - truth[key])
      }
      dishes++
    }
  }
  const share = (errors: Record<NutrientKey, number>): PerNutrient => {
    const out = zeros()
    for (const key of NUTRIENTS) out[key] = errors[key] / truthSum[key]
    return out
  }
  return { guessOnly: share(guessError), matcher: share(matchedError), matchedGramShare: matchedGrams / totalGrams, dishes }
}
