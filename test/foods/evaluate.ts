/** Scores a matcher on the dev set: per-food accuracy against the expected record, and dish-total errors for energy and each macro. */
import { Option } from "effect"
import type { Nutrition } from "../../src/domain/schemas.ts"
import type { FoodMatch, FoodQuery } from "../../src/foods/core/FoodDb.ts"
import { medianOf } from "../../src/foods/core/generic.ts"
import { type FoodIndex, rank } from "../../src/foods/core/matcher.ts"
import { seededRandom } from "../support/seeded.ts"
import { DEV_DISHES, DEV_FOODS, type DevFood } from "./devset.ts"

export type Matcher = (query: FoodQuery) => Option.Option<FoodMatch>

/** The dev set is split by food into five folds; the matcher is tuned on four and judged on the fifth it never saw. */
export const FOLDS = 5
export const HELD_OUT_FOLD = 4

/**
 * A food's fold, from a hash (FNV-1a) of its expected record, so that every query naming one food ("white rice",
 * "jasmine rice") falls in the same fold, and a food keeps its fold when others are added.
 */
export const foldOf = (food: DevFood): number => {
  let hash = 0x811c9dc5
  for (const char of food.ndb ?? food.query) hash = Math.imul(hash ^ char.charCodeAt(0), 0x01000193) >>> 0
  return hash % FOLDS
}

/** The foods the matcher may be tuned on, and the held-out fifth whose figures count. */
export const TUNING_FOODS = DEV_FOODS.filter((food) => foldOf(food) !== HELD_OUT_FOLD)
export const HELD_OUT_FOODS = DEV_FOODS.filter((food) => foldOf(food) === HELD_OUT_FOLD)


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

/** How a vision model's per-100 g guess for a dev food is made. */
export type GuessModel = (food: DevFood, random: () => number) => Nutrition

/** How far a model's guess leans on the true record rather than on what the name means in general (see nameCentredGuesses). */
export const RECORD_SHARE = 0.8

/**
 * Guesses centred where a model's are, not on the answer: a model names "tofu" and imagines tofu in general, so its
 * guess is drawn towards the typical record of the name (the median of the 8 records whose words fit it best, ranked
 * without any estimate) and only partly towards the food in the photo (RECORD_SHARE, geometrically), then strays as
 * perturbedGuess does. Record-centred guesses point back at the expected record and hide the matcher's errors on
 * plain names ("tofu" → fuyu), which is why the dev set's held-out fifth predicted 2.5 % fat error where dishes never
 * seen showed 8.1 %.
 */
export const nameCentredGuesses = (typicalOf: (query: string) => Nutrition | undefined): GuessModel => {
  const typical = new Map<string, Nutrition | undefined>()
  return (food, random) => {
    const truth = truthOf(food)
    if (!typical.has(food.query)) typical.set(food.query, typicalOf(food.query))
    const named = typical.get(food.query) ?? truth
    const centre = (key: NutrientKey) => Math.exp(RECORD_SHARE * Math.log(truth[key] + 1) + (1 - RECORD_SHARE) * Math.log(named[key] + 1)) - 1
    return perturbedGuess({ ...food, kcal: centre("kcal"), macros: [centre("protein_g"), centre("carbs_g"), centre("fat_g")] }, random)
  }
}

/** What a name means in general in an index: the median of the 8 records whose words fit it best, ranked without any estimate. */
export const typicalIn =
  (index: FoodIndex) =>
  (query: string): Nutrition | undefined => {
    const ranked = rank(index, { query, guessPer100g: { kcal: 0, protein_g: 0, carbs_g: 0, fat_g: 0 } }, 8, { ignoreGuess: true })
    if (ranked.length === 0) return undefined
    const of = (key: NutrientKey) => medianOf(ranked.map((c) => c.record.per100g[key]))
    return { kcal: of("kcal"), protein_g: of("protein_g"), carbs_g: of("carbs_g"), fat_g: of("fat_g") }
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

export const evaluateFoods = (match: Matcher, rounds = 5, seed = 42, foods: ReadonlyArray<DevFood> = DEV_FOODS, guessOf: GuessModel = perturbedGuess) => {
  const random = seededRandom(seed)
  const outcomes: Array<FoodOutcome> = []
  for (let round = 0; round < rounds; round++) {
    for (const food of foods) {
      const guess = guessOf(food, random)
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
 * total, as a share of the mean true total, and the share of grams matched to a record. Given a part of the dev
 * set, each dish keeps only the ingredients of that part (dishes left empty are skipped).
 */
export const evaluateDishes = (match: Matcher, rounds = 40, seed = 7, foods: ReadonlyArray<DevFood> = DEV_FOODS, guessOf: GuessModel = perturbedGuess) => {
  const random = seededRandom(seed)
  const byQuery = new Map(DEV_FOODS.map((food) => [food.query, food]))
  const inPart = new Set(foods)
  const truthSum = zeros()
  const guessError = zeros()
  const matchedError = zeros()
  let matchedGrams = 0
  let totalGrams = 0
  let fittingGrams = 0
  let matchedFittingGrams = 0
  let dishes = 0
  for (let round = 0; round < rounds; round++) {
    for (const dish of DEV_DISHES) {
      const truth = zeros()
      const guessed = zeros()
      const matched = zeros()
      let ingredients = 0
      for (const [query, grams] of dish.ingredients) {
        const food = byQuery.get(query)
        if (food === undefined) throw new Error(`dish ingredient ${query} is not a dev food`)
        if (!inPart.has(food)) continue
        ingredients++
        const guess = guessOf(food, random)
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
        if (food.ndb !== null) {
          fittingGrams += grams
          if (Option.isSome(result)) matchedFittingGrams += grams
        }
      }
      if (ingredients === 0) continue
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
  return {
    guessOnly: share(guessError),
    matcher: share(matchedError),
    matchedGramShare: matchedGrams / totalGrams,
    /** The same among foods SR28 has a fitting record for (the others should keep the model's numbers). */
    matchedFittingGramShare: matchedFittingGrams / Math.max(1, fittingGrams),
    dishes
  }
}
