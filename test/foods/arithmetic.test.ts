import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { allocateGrams, hundredths, nutritionFor, sumNutrition } from "../../src/foods/core/arithmetic.ts"

const grams = fc.double({ min: 0.01, max: 3000, noNaN: true })
const total = fc.integer({ min: 100, max: 500_000 }).map((cents) => cents / 100)

describe("allocateGrams (known_total_grams)", () => {
  it("sums exactly to the supplied total, every part at least 0.01 g, in hundredths", () => {
    fc.assert(
      fc.property(fc.array(grams, { minLength: 1, maxLength: 20 }), total, (estimated, supplied) => {
        const parts = allocateGrams(estimated, supplied)
        expect(parts).toHaveLength(estimated.length)
        const cents = parts.map((p) => Math.round(p * 100))
        expect(cents.reduce((a, b) => a + b, 0)).toBe(Math.round(supplied * 100))
        for (const [i, p] of parts.entries()) {
          expect(p).toBeGreaterThanOrEqual(0.01)
          expect(Math.abs(p * 100 - cents[i]!)).toBeLessThan(1e-6)
        }
      })
    )
  })

  it("keeps each item's photo-estimated share to within 0.01 g (plus the floor for vanishing items)", () => {
    fc.assert(
      fc.property(fc.array(grams, { minLength: 1, maxLength: 20 }), total, (estimated, supplied) => {
        const parts = allocateGrams(estimated, supplied)
        const sum = estimated.reduce((a, b) => a + b, 0)
        const bumped = estimated.filter((g) => (g / sum) * supplied < 0.01).length
        for (const [i, g] of estimated.entries()) {
          const exact = (g / sum) * supplied
          expect(Math.abs(parts[i]! - exact)).toBeLessThanOrEqual(0.01 * (1 + bumped) + 1e-9)
        }
      })
    )
  })

  it("preserves order: a larger photo estimate never gets fewer grams", () => {
    fc.assert(
      fc.property(fc.array(grams, { minLength: 2, maxLength: 20 }), total, (estimated, supplied) => {
        const parts = allocateGrams(estimated, supplied)
        for (let i = 0; i < estimated.length; i++) {
          for (let j = 0; j < estimated.length; j++) {
            if (estimated[i]! > estimated[j]! + 1e-9) expect(parts[i]! + 0.01 + 1e-9).toBeGreaterThanOrEqual(parts[j]!)
          }
        }
      })
    )
  })

  it("is exact in a worked example", () => {
    expect(allocateGrams([150, 180, 10], 400)).toEqual([176.47, 211.76, 11.77])
    expect(allocateGrams([1, 1, 1], 1)).toEqual([0.34, 0.33, 0.33])
    expect(allocateGrams([1000, 0.0001], 1)).toEqual([0.99, 0.01])
  })
})

describe("nutrition arithmetic", () => {
  it("item nutrition follows per_100g × grams / 100 and totals are the sum of the items as reported", () => {
    const per100 = { kcal: 130, protein_g: 2.7, carbs_g: 28.2, fat_g: 0.3 }
    expect(nutritionFor(per100, 180)).toEqual({ kcal: 234, protein_g: 4.9, carbs_g: 50.8, fat_g: 0.5 })
    fc.assert(
      fc.property(fc.array(fc.record({ kcal: fc.double({ min: 0, max: 900, noNaN: true }), protein_g: fc.double({ min: 0, max: 100, noNaN: true }), carbs_g: fc.double({ min: 0, max: 100, noNaN: true }), fat_g: fc.double({ min: 0, max: 100, noNaN: true }) }), { minLength: 1, maxLength: 20 }), (items) => {
        const rounded = items.map((n) => nutritionFor(n, 100))
        const totals = sumNutrition(rounded)
        const kcal = rounded.reduce((a, n) => a + n.kcal, 0)
        expect(Math.abs(totals.kcal - kcal)).toBeLessThan(0.05 + 1e-9)
        expect(totals.kcal * 10).toBeCloseTo(Math.round(totals.kcal * 10), 6)
      })
    )
  })
})

describe("hundredths (the food paths' figures)", () => {
  /** n ÷ 10^k rounded half up to hundredths, in exact decimal arithmetic. */
  const decimalHundredths = (n: bigint, k: number): number => {
    const scaled = n * 100n * 2n + 10n ** BigInt(k) // 2 × (n × 100 ÷ 10^k + ½), over 2 × 10^k
    const denominator = 2n * 10n ** BigInt(k)
    const floor = scaled >= 0n ? scaled / denominator : -((-scaled + denominator - 1n) / denominator)
    return Number(floor) / 100
  }

  it("rounds a decimal figure half up as it is written, halves included", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 9n), max: 10n ** 9n }), fc.integer({ min: 0, max: 6 }), (n, k) => {
        expect(hundredths(Number(n) / 10 ** k) + 0).toBe(decimalHundredths(n, k) + 0) // -0 is written 0
      }),
      { numRuns: 20_000 }
    )
    expect(hundredths((0.85 * 150) / 100)).toBe(1.28)
    expect(hundredths(-1.275)).toBe(-1.27)
    expect(hundredths(2.675)).toBe(2.68)
  })
})
