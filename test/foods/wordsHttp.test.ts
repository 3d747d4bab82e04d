// CONTRACT "A meal in words" through HTTP: POST /v1/nutrition with text, on the shipped SR28 copy stored in the test's
// own database (PGlite, or PostgreSQL with TEST_DATABASE_URL) and read back as a server reads it; every refusal.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { makeFoodDbLive } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { errorCode, isRecord, send } from "../support/http.ts"
import { Server, serverLayer } from "../support/server.ts"

const dependencies = Layer.mergeAll(VisionModelLive, makeFoodDbLive({ shipped: true }), FundingMemory({ alice: 1 }), LimitsUnlimited)

interface Item {
  name: string
  query: string
  text: string
  grams: number
  grams_basis: string
  fdc_id: string
  matched_name: string
  portion?: { amount: number; unit: string; grams: number }
  nutrition: Record<string, number | null>
}
interface Answer {
  items: Array<Item>
  totals: Record<string, number | null>
  total_grams: number
  complete: boolean
  unmatched: Array<{ index: number; query: string; text: string; suggestions: Array<{ fdc_id: string; name: string }> }>
}

const post = (body: unknown) => Effect.flatMap(Server, ({ url }) => Effect.promise(() => send(`${url}/v1/nutrition`, { method: "POST", body })))
const meal = (text: string) =>
  Effect.map(post({ text }), (answer) => {
    expect(answer.status, `${text}: ${answer.text}`).toBe(200)
    return answer.body as Answer
  })
const message = (body: unknown): string => (isRecord(body) && isRecord(body["error"]) ? String(body["error"]["message"]) : "")

describe("a meal in words over HTTP", () => {
  it.layer(serverLayer({ dependencies }), { timeout: 120_000 })("on the shipped SR28 copy read from the database", (it) => {
    it.effect("a sentence is read into foods, each with its words, its grams and how they were found; one it cannot read is listed beside", () =>
      Effect.gen(function* () {
        const body = yield* meal("2 eggs, a slice of toast with butter and a cortado")
        expect(body.items.map((i) => [i.text, i.query, i.grams, i.grams_basis, i.portion?.unit])).toEqual([
          ["2 eggs", "eggs", 88, "portion", "medium"],
          ["a slice of toast", "toast", 22, "portion", "slice"],
          ["butter", "butter", 5, "typical", expect.stringMatching(/^pat/)]
        ])
        expect(body.items.map((i) => i.matched_name)).toEqual(["Egg, whole, raw, fresh", "Bread, white, commercially prepared, toasted", "Butter, salted"])
        expect(body.complete).toBe(false)
        expect(body.unmatched.map((u) => [u.index, u.query, u.text])).toEqual([[3, "cortado", "a cortado"]])
        expect(body.unmatched[0]?.suggestions.length).toBeGreaterThan(0)
        for (const s of body.unmatched[0]?.suggestions ?? []) expect(s.name).toMatch(/coffee/i)
        // Totals are the items' sum; a food nothing matches is never counted as zero.
        expect(body.total_grams).toBe(115)
        expect(body.totals["kcal"]).toBeCloseTo(body.items.reduce((s, i) => s + (i.nutrition["kcal"] ?? 0), 0), 1)
      }))

    it.effect("numbers in digits, fractions and words; weights as stated; measuring units through the food's own portion", () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<readonly [string, number, string]> = [
          ["150 g rice, cooked", 150, "stated"],
          ["150g rice, cooked", 150, "stated"],
          ["3 oz chicken breast", 85.05, "stated"],
          ["1 lb ground beef", 453.59, "stated"],
          ["1 tbsp olive oil", 13.5, "stated"],
          ["2 Tbsp. olive oil", 27, "stated"],
          ["1 tablespoon olive oil", 13.5, "stated"],
          ["1½ cups milk", 366, "stated"],
          ["1 1/2 cups milk", 366, "stated"],
          ["one and a half cups of milk", 366, "stated"],
          ["half a cup of milk", 122, "stated"],
          ["250 ml milk", 257.82, "stated"],
          ["two large eggs", 100, "portion"],
          ["a couple of eggs", 88, "portion"],
          ["half a dozen eggs", 264, "portion"]
        ]
        for (const [text, grams, basis] of cases) {
          const body = yield* meal(text)
          expect([text, body.items.map((i) => [i.grams, i.grams_basis])]).toEqual([text, [[grams, basis]]])
        }
      }))

    it.effect("containers, counts and typical servings", () =>
      Effect.gen(function* () {
        const body = yield* meal("For lunch I had a turkey sandwich, an apple and a glass of milk.\nA can of coke; some rice")
        // A count of a food that has no piece (a sandwich SR28 lists by the sub) is that many typical servings.
        expect(body.items.map((i) => [i.text, i.grams_basis])).toEqual([
          ["a turkey sandwich", "typical"],
          ["an apple", "portion"],
          ["a glass of milk", "portion"],
          ["A can of coke", "portion"],
          ["rice", "typical"]
        ])
        const [, apple, milk, coke, rice] = body.items
        expect([apple?.grams, apple?.portion?.unit]).toEqual([182, 'medium (3" dia)'])
        expect(milk?.portion).toEqual({ amount: 1, unit: "glass (240 ml)", grams: milk?.grams })
        expect(milk?.grams).toBeCloseTo((240 * 244) / 236.6, 1)
        expect([coke?.matched_name, coke?.grams]).toEqual(["Beverages, carbonated, cola, regular", 370])
        expect([rice?.matched_name, rice?.grams]).toEqual(["Rice, white, long-grain, regular, enriched, cooked", 158])
      }))

    it.effect("the unit is evidence for the record: a slice of pizza is a pizza record with a slice, a cup of coffee brewed coffee", () =>
      Effect.gen(function* () {
        const body = yield* meal("two slices of pizza and a cup of coffee")
        const [pizza, coffee] = body.items
        expect(pizza?.matched_name).toMatch(/^Pizza/)
        expect(pizza?.portion?.unit).toMatch(/^slice/)
        expect(pizza?.grams_basis).toBe("portion")
        expect(coffee?.matched_name).toBe("Beverages, coffee, brewed, prepared with tap water")
        expect(body.complete).toBe(true)
      }))

    it.effect("a food nothing matches and a unit the food cannot take are unmatched with their words; sushi gets suggestions", () =>
      Effect.gen(function* () {
        const body = yield* meal("sushi, 2 scoops of rice and zzqxv")
        expect(body.items).toEqual([])
        expect(body.unmatched.map((u) => [u.index, u.text])).toEqual([
          [0, "sushi"],
          [1, "2 scoops of rice"],
          [2, "zzqxv"]
        ])
        expect(body.unmatched[0]?.suggestions.length).toBeGreaterThan(0)
        expect([body.complete, body.total_grams, body.totals["kcal"], body.totals["fiber_g"]]).toEqual([false, 0, 0, null])
      }))

    it.effect("the items path takes the same unit spellings: tbsp for tablespoon, slices for slice", () =>
      Effect.gen(function* () {
        const answer = yield* post({ items: [{ query: "olive oil", portion: { amount: 1, unit: "tbsp" } }, { query: "toast", portion: { amount: 2, unit: "slices" } }] })
        expect(answer.status, answer.text).toBe(200)
        expect((answer.body as Answer).items.map((i) => [i.grams, i.portion?.unit])).toEqual([
          [13.5, "tablespoon"],
          [44, "slice"]
        ])
      }))

    it.effect("the slowest texts a caller can build are answered, never a 500, and /health is answered beside them", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const slow = [
          "1/2 ".repeat(500),
          "a ".repeat(1000),
          "½".repeat(2000),
          "(".repeat(2000),
          "1 1 1 1 ".repeat(250),
          Array.from({ length: 20 }, (_, i) => `zq${i}wv${"k".repeat(60)} qq${i}zz${"j".repeat(30)}`).join(", "),
          Array.from({ length: 20 }, (_, i) => Array.from({ length: 40 }, (_, k) => String.fromCharCode(97 + ((i * 7 + k * 3) % 26))).join(" ")).join(", "),
          Array.from({ length: 20 }, (_, i) => ["chicken", "rice", "salad", "cheese", "bread", "milk", "sauce", "beef"].map((_, k, all) => all[(i + k) % 8]).join(" ")).join(", ")
        ]
        for (const text of slow) {
          const started = Date.now()
          const [answer, health] = yield* Effect.promise(() =>
            Promise.all([send(`${url}/v1/nutrition`, { method: "POST", body: { text: text.slice(0, 2000) } }), send(`${url}/health`)])
          )
          expect([text.slice(0, 20), answer.status, health.status]).toEqual([text.slice(0, 20), 200, 200])
          expect(Date.now() - started).toBeLessThan(20_000)
        }
      }))

    it.effect("refusals name text: blank, over 2,000 characters (code points), over 20 foods, both or neither of items and text", () =>
      Effect.gen(function* () {
        const refused: ReadonlyArray<unknown> = [
          { text: "" },
          { text: "   \n\t " },
          { text: "a".repeat(2001) },
          { text: "🍎".repeat(2001) },
          { text: Array.from({ length: 21 }, (_, i) => `${i + 1} eggs`).join(", ") },
          { text: "2 eggs", items: [{ query: "egg", grams: 50 }] },
          {},
          { language: "en" },
          { text: 42 },
          { text: "2 eggs", extra: true },
          { text: "2 eggs", language: "fr" }
        ]
        for (const body of refused) {
          const answer = yield* post(body)
          expect([JSON.stringify(body).slice(0, 60), answer.status, errorCode(answer)]).toEqual([JSON.stringify(body).slice(0, 60), 400, "invalid_request"])
        }
        for (const body of refused.slice(0, 6)) expect(message((yield* post(body)).body)).toContain("text")
        // 2,000 code points are accepted, though an apple emoji is two UTF-16 units; twenty foods too.
        expect((yield* post({ text: `an apple ${"🍎".repeat(1991)}` })).status).toBe(200)
        expect((yield* post({ text: Array.from({ length: 20 }, (_, i) => `${i + 1} eggs`).join(", ") })).status).toBe(200)
        expect((yield* post({ text: "2 eggs", language: "lt" })).status).toBe(200)
      }))
  })
})
