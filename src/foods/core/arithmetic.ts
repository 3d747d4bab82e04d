/** The nutrition arithmetic of every answer (an analysis, the food paths, a meal in words): grams allocation from a supplied total, per-item nutrition, totals and rounding. */
import type { Nutrition } from "../../domain/schemas.ts"

/** Grams travel in hundredths, nutrients in tenths: the precision a kitchen scale and a label give. */
export const roundGrams = (g: number) => Math.round(g * 100) / 100
export const roundNutrient = (v: number) => Math.round(v * 10) / 10

/**
 * Hundredths, half up on the decimal figure: the food paths' figures have at most two decimals (the analysis keeps its
 * own tenths). 0.85 × 150 ÷ 100 is 1.2749999… in binary and 1.275 in decimal, as a caller writes it: 1.28.
 */
export const hundredths = (v: number) => {
  const x = v * 100
  // Only a figure within a hair of a half has its decimal digits read (a string made and parsed, 15 times the cost):
  // every other rounds the same either way. A hair is what the twelfth significant digit can move.
  const half = Math.abs(x - Math.floor(x) - 0.5)
  if (Math.abs(x) < 1e11 && half > 1e-11 * Math.abs(x) + 1e-9) return Math.round(x) / 100
  return Math.round(Number(x.toPrecision(12))) / 100
}

const mapNutrition = (n: Nutrition, f: (v: number) => number): Nutrition => ({
  kcal: f(n.kcal),
  protein_g: f(n.protein_g),
  carbs_g: f(n.carbs_g),
  fat_g: f(n.fat_g)
})

export const roundNutrition = (n: Nutrition) => mapNutrition(n, roundNutrient)

/** Nutrition of `grams` of a food given per 100 g, from the already-rounded figures a caller sees. */
export const nutritionFor = (per100g: Nutrition, grams: number): Nutrition =>
  mapNutrition(per100g, (v) => roundNutrient((v * grams) / 100))

/** Sum of the items' reported nutrition, so totals always equal what the items add up to. */
export const sumNutrition = (items: ReadonlyArray<Nutrition>): Nutrition =>
  roundNutrition(
    items.reduce(
      (acc, n) => ({
        kcal: acc.kcal + n.kcal,
        protein_g: acc.protein_g + n.protein_g,
        carbs_g: acc.carbs_g + n.carbs_g,
        fat_g: acc.fat_g + n.fat_g
      }),
      { kcal: 0, protein_g: 0, carbs_g: 0, fat_g: 0 }
    )
  )

export const sumGrams = (grams: ReadonlyArray<number>) => roundGrams(grams.reduce((a, b) => a + b, 0))

/**
 * Splits `totalGrams` (at most two decimals) over items in proportion to their photo-estimated grams, by the
 * largest-remainder method in 0.01 g units: the parts sum exactly to the total and every part is at least 0.01 g.
 */
export const allocateGrams = (estimated: ReadonlyArray<number>, totalGrams: number): ReadonlyArray<number> => {
  const units = Math.round(totalGrams * 100)
  const n = estimated.length
  if (n === 0) return []
  if (units < n) throw new RangeError(`cannot give ${n} items at least 0.01 g out of ${totalGrams} g`)
  const weights = estimated.map((g) => (Number.isFinite(g) && g > 0 ? g : 0))
  const weightSum = weights.reduce((a, b) => a + b, 0)
  const shares = weightSum > 0 ? weights.map((w) => w / weightSum) : weights.map(() => 1 / n)
  const exact = shares.map((s) => s * units)
  const parts = exact.map((x) => Math.floor(x))
  let left = units - parts.reduce((a, b) => a + b, 0)
  const byRemainder = exact
    .map((x, i) => ({ i, remainder: x - Math.floor(x) }))
    .sort((a, b) => b.remainder - a.remainder || a.i - b.i)
  for (const { i } of byRemainder) {
    if (left === 0) break
    parts[i] = parts[i]! + 1
    left--
  }
  // An item too small to register still weighs 0.01 g; the largest item gives up that unit.
  for (let i = 0; i < n; i++) {
    if (parts[i] === 0) {
      const largest = parts.reduce((best, p, j) => (p > parts[best]! ? j : best), 0)
      parts[largest] = parts[largest]! - 1
      parts[i] = 1
    }
  }
  return parts.map((p) => p / 100)
}
