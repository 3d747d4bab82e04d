// CONTRACT "Foods and nutrition": GET /v1/foods ranks the plain, everyday record for a text first. Measured on two
// sets of everyday names from two sources (test/foods/quality/): tuned on one, reported on the other.
import { describe, expect, it } from "@effect/vitest"
import { buildIndex } from "../../src/foods/core/matcher.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { describeQuality, plainFirst, readSet } from "./quality/plainFirst.ts"

describe("search quality on the shipped SR28 copy", () => {
  const records = shippedFoods()
  const index = buildIndex(records)
  const tune = readSet("tune.tsv")
  const heldOut = readSet("held-out.tsv")

  it("names only records the shipped copy has, in two sets that share no name", () => {
    const ids = new Set(records.map((r) => r.sourceId))
    for (const { name, plain } of [...tune, ...heldOut]) {
      expect(plain.length, name).toBeGreaterThan(0)
      for (const id of plain) expect(ids.has(id), `${name}: ${id}`).toBe(true)
    }
    const tuned = new Set(tune.map((n) => n.name))
    expect(heldOut.filter((n) => tuned.has(n.name))).toEqual([])
    expect(Math.min(tune.length, heldOut.length)).toBeGreaterThanOrEqual(60)
  })

  it("ranks the plain record first for at least 90 % of the held-out names", () => {
    const tuned = plainFirst(index, tune)
    const held = plainFirst(index, heldOut)
    console.log(`${describeQuality("tune.tsv", tuned)}\n${describeQuality("held-out.tsv", held)}`)
    expect(held.share).toBeGreaterThanOrEqual(0.9)
  })
})
