/** How a record's per-100 g values compare with the vision model's own guess, nutrient by nutrient: a ranking signal and a veto. */
import type { Nutrition } from "../../domain/schemas.ts"

const KEYS = ["kcal", "protein_g", "carbs_g", "fat_g"] as const

/**
 * Added to both sides before comparing, so that near-zero values (the fat of rice, the energy of tea) are not
 * judged by huge ratios of tiny numbers: 10 kcal, 3 g of a macronutrient.
 */
const SMOOTHING: Readonly<Record<(typeof KEYS)[number], number>> = { kcal: 10, protein_g: 3, carbs_g: 3, fat_g: 3 }

/**
 * The largest ratio between a record and the guess that can still be the same food, per nutrient. A model's
 * guesses stray by about −35 % to +45 %; beyond these ratios the record is another food (or another
 * preparation, such as potatoes roasted in oil against plain baked ones) and the item keeps the guess.
 */
const MAX_RATIO: Readonly<Record<(typeof KEYS)[number], number>> = { kcal: 2.4, protein_g: 2.4, carbs_g: 2.4, fat_g: 2.2 }

/** Ratios up to this are within the guess's own error and cost little. */
const TOLERATED_DISTANCE = Math.log(1.55)

const ratio = (record: Nutrition, guess: Nutrition, key: (typeof KEYS)[number]) => (record[key] + SMOOTHING[key]) / (guess[key] + SMOOTHING[key])

/**
 * Every nutrient of the record is within MAX_RATIO of the guess. This runs for every candidate of every item, so
 * it is written out field by field, without logarithms or lookups by key.
 */
export const isPlausible = (record: Nutrition, guess: Nutrition): boolean =>
  within((record.kcal + SMOOTHING.kcal) / (guess.kcal + SMOOTHING.kcal), MAX_RATIO.kcal) &&
  within((record.protein_g + SMOOTHING.protein_g) / (guess.protein_g + SMOOTHING.protein_g), MAX_RATIO.protein_g) &&
  within((record.carbs_g + SMOOTHING.carbs_g) / (guess.carbs_g + SMOOTHING.carbs_g), MAX_RATIO.carbs_g) &&
  within((record.fat_g + SMOOTHING.fat_g) / (guess.fat_g + SMOOTHING.fat_g), MAX_RATIO.fat_g)

const within = (r: number, max: number) => !(r > max || r * max < 1)

/** Every nutrient of the record is within the guess's own error (TOLERATED_DISTANCE): the guess may well be of this food. */
export const isClose = (record: Nutrition, guess: Nutrition): boolean =>
  KEYS.every((key) => Math.abs(Math.log(ratio(record, guess, key))) <= TOLERATED_DISTANCE)

/** |ln ratio| of the record's energy to the guess (smoothed). */
export const energyDistance = (record: Nutrition, guess: Nutrition) => Math.abs(Math.log(ratio(record, guess, "kcal")))

/**
 * The guess's vote on a candidate, ≤ 0: a gentle slope inside the guess's own error (so the usual record of a
 * food wins over an odd one that happens to sit nearer a noisy guess), steep beyond it, on all four nutrients.
 */
export const guessScore = (record: Nutrition, guess: Nutrition): number => {
  let sum = 0
  let excess = 0
  let excessSquared = 0
  for (const key of KEYS) {
    const distance = Math.abs(Math.log(ratio(record, guess, key)))
    const beyond = Math.max(0, distance - TOLERATED_DISTANCE)
    sum += distance
    excess += beyond
    excessSquared += beyond * beyond
  }
  return -0.35 * (sum / KEYS.length) - 4 * excess - 4 * excessSquared
}
