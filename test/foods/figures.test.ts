// CONTRACT "Foods and nutrition": per_100g is the database's figure as it stands, an item's nutrition is
// per_100g × grams ÷ 100 and totals the sum of the items, each to at most two decimals, so a caller can redo the
// arithmetic from the answer; a portion's grams obey the bound of grams (0.01–5000). The same on the fast lane and
// through the HttpApi stack, and from MCP's food_nutrition.
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { connect } from "../support/clients.ts"
import { TestDatabase } from "../support/database.ts"
import { errorCode, isRecord, send } from "../support/http.ts"
import { startServer } from "../support/server.ts"

const records = shippedFoods()
const dependencies = Layer.mergeAll(VisionModelLive, FoodDbMemory(records), FundingMemory({ alice: 1 }), LimitsUnlimited)
const KEYS = ["kcal", "protein_g", "carbs_g", "fat_g", "fiber_g", "sugars_g", "saturated_fat_g", "sodium_mg", "cholesterol_mg", "potassium_mg", "calcium_mg", "iron_mg", "vitamin_c_mg"] as const

/** What a caller computes from the answer: two decimals, half up on the decimal figure (1.275 is 1.28). */
const round2 = (v: number) => Math.round(Number((v * 100).toPrecision(12))) / 100

type Figures = Record<(typeof KEYS)[number], number | null>
interface Answered {
  items: Array<{ fdc_id: string; grams: number; per_100g: Figures; nutrition: Figures }>
  totals: Figures
  total_grams: number
}

/** One server with the fast lane, one whose every request goes through the HttpApi stack, on one database. */
class Servers extends Context.Tag("test/FigureServers")<Servers, readonly [string, string]>() {}

const servers = Layer.scoped(
  Servers,
  Effect.gen(function* () {
    const database = yield* Layer.build(TestDatabase.pipe(Layer.orDie))
    const start = (withoutFastLane: boolean) => startServer({ dependencies, database: Layer.succeedContext(database), withoutFastLane })
    return [(yield* start(false)).url, (yield* start(true)).url] as const
  })
)

const post = (url: string, body: unknown) => Effect.promise(() => send(`${url}/v1/nutrition`, { method: "POST", body }))

/** Every figure of an answer multiplies out from its per_100g and grams, and the totals add up the items. */
const expectArithmetic = (answer: Answered) => {
  for (const item of answer.items) {
    for (const key of KEYS) {
      const per = item.per_100g[key]
      expect([item.fdc_id, key, item.nutrition[key]]).toEqual([item.fdc_id, key, per === null ? null : round2((per * item.grams) / 100)])
    }
  }
  for (const key of KEYS) {
    const values = answer.items.map((i) => i.nutrition[key])
    const total = values.some((v) => v === null) || values.length === 0 ? null : round2(values.reduce<number>((a, v) => a + (v ?? 0), 0))
    expect([key, answer.totals[key]]).toEqual([key, total ?? (key === "kcal" || key === "protein_g" || key === "carbs_g" || key === "fat_g" ? 0 : null)])
  }
  expect(answer.total_grams).toBe(round2(answer.items.reduce((a, i) => a + i.grams, 0)))
}

const MEALS: ReadonlyArray<unknown> = [
  { items: [{ fdc_id: "01001", grams: 150 }] },
  {
    items: [
      { query: "rice, white, cooked", grams: 150 },
      { fdc_id: "01123", portion: { amount: 2, unit: "large" } },
      { fdc_id: "01001", grams: 13.37 },
      { query: "milk, whole", portion: { amount: 1, unit: "cup" } },
      { query: "broccoli", grams: 87.5 },
      { query: "olive oil", grams: 4.99 },
      { query: "zzqxv", grams: 10 }
    ]
  },
  { items: [{ query: "almonds", grams: 28.35 }, { query: "banana", portion: { amount: 1.5, unit: "medium" } }, { query: "cheddar cheese", grams: 0.01 }] }
]

describe("the figures of the food paths", () => {
  layer(servers, { excludeTestServices: true, timeout: 120_000 })("on a server with the lane and one without", (it) => {
  it.scoped("per_100g is the record's figure; nutrition and totals multiply out from the answer, on the lane and the stack", () =>
    Effect.gen(function* () {
      const urls = yield* Servers
      const butter = records.find((r) => r.sourceId === "01001")!
      for (const url of urls) {
        const food = yield* Effect.promise(() => send(`${url}/v1/foods/01001`))
        const per = isRecord(food.body) ? (food.body["per_100g"] as Figures) : undefined
        // SR28's butter: 0.85 g protein, 51.368 g saturated fat, not 0.9 and 51.4.
        expect([per?.protein_g, per?.saturated_fat_g]).toEqual([butter.per100g.protein_g, butter.more?.saturated_fat_g])
        expect([per?.protein_g, per?.saturated_fat_g]).toEqual([0.85, 51.368])
        for (const meal of MEALS) {
          const answer = yield* post(url, meal)
          expect(answer.status).toBe(200)
          const body = answer.body as Answered
          expect(body.items.length).toBeGreaterThan(0)
          expectArithmetic(body)
        }
        // 150 g of butter: 0.85 × 150 ÷ 100 is 1.275, to two decimals 1.28 (not 0.9's 1.35, nor a tenth's 1.3).
        const one = (yield* post(url, MEALS[0])).body as Answered
        expect([one.items[0]?.per_100g.protein_g, one.items[0]?.nutrition.protein_g, one.totals.protein_g]).toEqual([0.85, 1.28, 1.28])
      }
    }))

  it.scoped("a portion whose grams leave 0.01–5000 is 400 invalid_request naming items.N.portion.amount, never a 200 with nulls", () =>
    Effect.gen(function* () {
      const urls = yield* Servers
      const portions = [1e306, Number.MAX_VALUE, 1e6, 200, 1e-9]
      for (const url of urls) {
        for (const amount of portions) {
          const answer = yield* post(url, { items: [{ query: "rice, white, cooked", grams: 10 }, { fdc_id: "01123", portion: { amount, unit: "large" } }] })
          expect([url, amount, answer.status, errorCode(answer)]).toEqual([url, amount, 400, "invalid_request"])
          const message = isRecord(answer.body) && isRecord(answer.body["error"]) ? String(answer.body["error"]["message"]) : ""
          expect(message).toContain("items.1.portion.amount")
          expect(answer.text).not.toContain("null")
        }
        // The largest that fits: 5000 g of 50 g eggs is 100 of them.
        const most = yield* post(url, { items: [{ fdc_id: "01123", portion: { amount: 100, unit: "large" } }] })
        expect(most.status).toBe(200)
        expect((most.body as Answered).items[0]?.grams).toBe(5000)
      }
    }))

  it.scoped("MCP food_nutrition refuses the same portion with invalid_request and answers figures that multiply out", () =>
    Effect.gen(function* () {
      const [url] = yield* Servers
      const client = yield* connect(url)
      const call = (args: unknown) => Effect.promise(() => client.callTool({ name: "food_nutrition", arguments: args as Record<string, unknown> }))
      const refused = yield* call({ items: [{ fdc_id: "01123", portion: { amount: 1e306, unit: "large" } }] })
      expect(refused.isError).toBe(true)
      const error = (refused.structuredContent as { error: { code: string; message: string } }).error
      expect([error.code, error.message.includes("items.0.portion.amount")]).toEqual(["invalid_request", true])
      const priced = yield* call(MEALS[1])
      expect(priced.isError).not.toBe(true)
      expectArithmetic(priced.structuredContent as unknown as Answered)
    }))
})
})
