// docs/foods.md "A meal in words": every row of its examples table is what the reader answers on the shipped SR28 copy.
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { buildIndex } from "../../src/foods/core/matcher.ts"
import { searchIn, trustedIn } from "../../src/foods/core/search.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { mealOf } from "../../src/foods/core/words/meal.ts"
import { root } from "../support/process.ts"

const doc = readFileSync(join(root, "docs/foods.md"), "utf8")
const table = doc.slice(doc.indexOf("<!-- words-examples -->"), doc.indexOf("<!-- /words-examples -->"))
const rows = table
  .split("\n")
  .filter((line) => line.startsWith("| `"))
  .map((line) => line.slice(1, -1).split("|").map((cell) => cell.trim()))

const index = buildIndex(shippedFoods())
const reader = { trusted: (text: string, limit: number) => trustedIn(index, text, limit), search: (text: string, limit: number) => searchIn(index, text, limit) }

describe("the examples of a meal in words in docs/foods.md", () => {
  it("are at least fifteen, each as the reader answers", () => {
    expect(rows.length).toBeGreaterThanOrEqual(15)
    for (const [written = "", from, record, grams, basis, portion] of rows) {
      const text = written.replace(/^`|`$/g, "")
      const food = mealOf(reader, text, 20).priced.find((p) => p.food.text === from)
      expect(food, `${text}: no food read from "${from}"`).toBeDefined()
      if (food === undefined) continue
      if (record === "unmatched") {
        expect("record" in food, text).toBe(false)
        continue
      }
      expect("record" in food ? [food.record.description, food.grams, food.basis, food.portion ? `${food.portion.amount} × ${food.portion.unit}` : ""] : [], text).toEqual([
        record,
        Number(grams),
        basis,
        portion
      ])
    }
  })
})
