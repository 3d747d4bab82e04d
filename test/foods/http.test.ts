// CONTRACT "Foods and nutrition": GET /v1/foods, GET /v1/foods/{fdc_id}, POST /v1/nutrition on the shipped SR28 copy,
// every refusal in its order (415/400, 401, 429), free: no key needed, nothing charged.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"
import { Food, FoodList, NutritionResult } from "../../src/foods/core/schemas.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { errorCode, isRecord, send } from "../support/http.ts"
import { withinOneMinute } from "../support/minute.ts"
import { Server, serverLayer } from "../support/server.ts"

const records = shippedFoods()
const dependencies = Layer.mergeAll(VisionModelLive, FoodDbMemory(records), FundingMemory({ alice: 1 }), LimitsUnlimited)
const MORE = ["fiber_g", "sugars_g", "saturated_fat_g", "sodium_mg", "cholesterol_mg", "potassium_mg", "calcium_mg", "iron_mg", "vitamin_c_mg"]

const call = (path: string, init: Parameters<typeof send>[1] = {}) =>
  Effect.flatMap(Server, ({ url }) => Effect.promise(() => send(`${url}${path}`, init)))
const nutrition = (body: unknown, headers: Record<string, string> = {}) => call("/v1/nutrition", { method: "POST", body, headers })

interface FoodBody {
  fdc_id: string
  name: string
  portions: Array<{ amount: number; unit: string; grams: number }>
  per_100g: Record<string, number | null>
}
const foodsOf = (body: unknown): Array<FoodBody> => (isRecord(body) ? (body["foods"] as Array<FoodBody>) : [])
const message = (body: unknown): string => (isRecord(body) && isRecord(body["error"]) ? String(body["error"]["message"]) : "")

describe("foods and nutrition over HTTP", () => {
  it.layer(serverLayer({ dependencies }), { timeout: 60_000 })("on the shipped SR28 copy", (it) => {
    it.effect("search ranks a plain record first, with portions and all thirteen nutrients; limit bounds the list", () =>
      Effect.gen(function* () {
        const tofu = yield* call("/v1/foods?q=tofu&limit=3")
        expect(tofu.status).toBe(200)
        const foods = foodsOf(tofu.body)
        expect(foods.length).toBe(3)
        expect(foods[0]?.name.toLowerCase()).toContain("tofu")
        expect(foods[0]?.name.toLowerCase()).not.toContain("fermented")
        for (const key of ["kcal", "protein_g", "carbs_g", "fat_g", ...MORE]) expect(foods[0]?.per_100g).toHaveProperty(key)
        expect(isRecord(tofu.body) && typeof tofu.body["matcher_version"]).toBe("string")
        const many = yield* call("/v1/foods?q=cheese")
        expect(foodsOf(many.body).length).toBe(10)
        const none = yield* call("/v1/foods?q=zzqxv")
        expect([none.status, foodsOf(none.body)]).toEqual([200, []])
      }))

    it.effect("search refuses an empty or over-long text and a limit of 0 or 26, naming the field", () =>
      Effect.gen(function* () {
        for (const path of ["/v1/foods?q=", "/v1/foods", `/v1/foods?q=${"a".repeat(201)}`, "/v1/foods?q=rice&limit=0", "/v1/foods?q=rice&limit=26", "/v1/foods?q=rice&limit=x"]) {
          const answer = yield* call(path)
          expect([path, answer.status, errorCode(answer)]).toEqual([path, 400, "invalid_request"])
        }
        expect(message((yield* call("/v1/foods?q=rice&limit=26")).body)).toContain("limit")
        expect(message((yield* call("/v1/foods?q=")).body)).toContain("q")
      }))

    it.effect("one food by its id; an unknown id is 404 food_not_found", () =>
      Effect.gen(function* () {
        const [first] = foodsOf((yield* call("/v1/foods?q=egg")).body)
        const one = yield* call(`/v1/foods/${first?.fdc_id}`)
        expect(one.status).toBe(200)
        expect(one.body).toEqual(first)
        const missing = yield* call("/v1/foods/99999999")
        expect([missing.status, errorCode(missing)]).toEqual([404, "food_not_found"])
      }))

    it.effect("nutrition by text and by id: grams scale per 100 g, a portion's grams come from its row, nulls stay null", () =>
      Effect.gen(function* () {
        const [egg] = foodsOf((yield* call("/v1/foods?q=egg, whole, raw")).body)
        const row = egg?.portions.find((p) => p.unit.toLowerCase().split(/[\s,]+/)[0] === "large")
        expect(row).toBeDefined()
        const answer = yield* nutrition({ items: [{ query: "rice, white, cooked", grams: 150 }, { fdc_id: egg?.fdc_id, portion: { amount: 2, unit: "large" }, name: "Eggs" }] })
        expect(answer.status).toBe(200)
        const body = answer.body as {
          items: Array<{ name: string; grams: number; fdc_id: string; nutrition_source: string; portion?: { grams: number }; per_100g: Record<string, number | null>; nutrition: Record<string, number | null> }>
          totals: Record<string, number | null>
          total_grams: number
          complete: boolean
          unmatched: Array<unknown>
          estimate: boolean
        }
        expect([body.complete, body.estimate, body.unmatched]).toEqual([true, true, []])
        const [rice, eggs] = body.items
        expect(rice?.grams).toBe(150)
        expect(rice?.nutrition_source).toBe("usda")
        expect(rice?.nutrition["kcal"]).toBeCloseTo(((rice?.per_100g["kcal"] ?? 0) * 150) / 100, 0)
        expect(eggs?.name).toBe("Eggs")
        expect(eggs?.grams).toBeCloseTo((2 * (row?.grams ?? 0)) / (row?.amount ?? 1), 2)
        expect(eggs?.portion?.grams).toBe(eggs?.grams)
        expect(body.total_grams).toBeCloseTo(150 + (eggs?.grams ?? 0), 2)
        for (const key of MORE) {
          for (const item of body.items) {
            if (item.per_100g[key] === null) expect(item.nutrition[key]).toBeNull()
          }
          if (body.items.some((i) => i.nutrition[key] === null)) expect(body.totals[key]).toBeNull()
        }
      }))

    it.effect("answers are written as JSON directly, and are exactly what their schemas encode (content type included)", () =>
      Effect.gen(function* () {
        const search = yield* call("/v1/foods?q=rice, white, cooked&limit=5")
        expect(search.headers.get("content-type")).toContain("application/json")
        expect(Schema.encodeUnknownSync(FoodList)(search.body)).toEqual(search.body)
        const one = yield* call("/v1/foods/01123")
        expect(Schema.encodeUnknownSync(Food)(one.body)).toEqual(one.body)
        const items = [
          { query: "tofu", grams: 100 },
          { fdc_id: "01123", portion: { amount: 2, unit: "large" }, name: "Eggs" },
          { query: "zzqxv", grams: 5 }
        ]
        const answer = yield* nutrition({ items })
        expect(answer.status).toBe(200)
        expect(Schema.encodeUnknownSync(NutritionResult)(answer.body)).toEqual(answer.body)
      }))

    it.effect("a text nothing matches is listed with suggestions, left out of the totals, and complete is false", () =>
      Effect.gen(function* () {
        const answer = yield* nutrition({ items: [{ query: "milk, whole", grams: 200 }, { query: "zzqxv chicken", grams: 100 }] })
        expect(answer.status).toBe(200)
        const body = answer.body as { items: Array<{ nutrition: { kcal: number } }>; totals: { kcal: number }; complete: boolean; unmatched: Array<{ index: number; query: string; suggestions: Array<unknown> }> }
        expect(body.complete).toBe(false)
        expect(body.items.length).toBe(1)
        expect(body.unmatched[0]?.index).toBe(1)
        expect(body.unmatched[0]?.query).toBe("zzqxv chicken")
        expect(body.unmatched[0]?.suggestions.length).toBeGreaterThan(0)
        expect(body.totals.kcal).toBe(body.items[0]?.nutrition.kcal)
        const none = yield* nutrition({ items: [{ query: "zzqxv", grams: 10 }] })
        const empty = none.body as { items: Array<unknown>; totals: Record<string, number | null>; total_grams: number }
        expect([empty.items, empty.total_grams, empty.totals["kcal"], empty.totals["fiber_g"]]).toEqual([[], 0, 0, null])
      }))

    it.effect("nutrition refuses bad items with 400 naming the field, an unknown id with 404, never a 500", () =>
      Effect.gen(function* () {
        const bad: Array<[unknown, string]> = [
          [{ items: [] }, "items"],
          [{ items: Array.from({ length: 21 }, () => ({ query: "rice", grams: 1 })) }, "items"],
          [{ items: [{ query: "rice", grams: 0 }] }, "grams"],
          [{ items: [{ query: "rice", grams: 5000.01 }] }, "grams"],
          [{ items: [{ query: "rice", grams: 1.234 }] }, "grams"],
          [{ items: [{ query: "rice", fdc_id: "20045", grams: 1 }] }, "query"],
          [{ items: [{ grams: 1 }] }, "query"],
          [{ items: [{ query: "rice" }] }, "grams"],
          [{ items: [{ query: "rice", grams: 1, colour: "white" }] }, "colour"],
          [{ items: [{ query: "rice", grams: 1 }], extra: 1 }, "extra"],
          [{ items: [{ query: "rice", grams: 1 }], language: "fr" }, "language"]
        ]
        for (const [body, field] of bad) {
          const answer = yield* nutrition(body)
          expect([field, answer.status, errorCode(answer)]).toEqual([field, 400, "invalid_request"])
          expect(message(answer.body)).toContain(field)
        }
        expect((yield* nutrition({ items: [{ query: "rice", grams: 5000 }, { query: "rice", grams: 0.01 }] })).status).toBe(200)
        const [egg] = foodsOf((yield* call("/v1/foods?q=egg, whole, raw")).body)
        const noUnit = yield* nutrition({ items: [{ fdc_id: egg?.fdc_id, portion: { amount: 1, unit: "bucket" } }] })
        expect([noUnit.status, errorCode(noUnit)]).toEqual([400, "invalid_request"])
        expect(message(noUnit.body)).toContain("bucket")
        expect(message(noUnit.body)).toContain(egg?.portions[0]?.unit ?? "?")
        const unknown = yield* nutrition({ items: [{ fdc_id: "99999999", grams: 10 }] })
        expect([unknown.status, errorCode(unknown)]).toEqual([404, "food_not_found"])
        const text = yield* call("/v1/nutrition", { method: "POST", rawBody: "{}", headers: { "content-type": "text/plain" } })
        expect(text.status).toBe(415)
      }))

    it.effect("a refusal says once what the field must be, after its path (no second reading of an optional field)", () =>
      Effect.gen(function* () {
        const said: Array<[unknown, string]> = [
          [{ items: [{ query: "", grams: 1 }] }, "items.0.query: a search text of 1 to 200 characters is required"],
          [{ items: [{ query: "rice", grams: 0 }] }, "items.0.grams: from 0.01 to 5000"],
          [{ items: [{ query: "rice", grams: 1.234 }] }, "items.0.grams: at most two decimals"],
          [{ items: [{ query: "rice", grams: 1 }, { fdc_id: "20045", portion: { amount: 0, unit: "cup" } }] }, "items.1.portion.amount: a number above 0"],
          [{ items: [] }, "items: 1 to 20 items"]
        ]
        for (const [body, words] of said) {
          const answer = yield* nutrition(body)
          const issues = isRecord(answer.body) && isRecord(answer.body["error"]) ? answer.body["error"]["issues"] : undefined
          expect([answer.status, message(answer.body), Array.isArray(issues) && issues.length]).toEqual([400, words, 1])
        }
        expect(message((yield* call("/v1/foods?q=")).body)).toBe("q: a search text of 1 to 200 characters is required")
      }))

    it.effect("no key is needed; a key that is sent must be valid (401 after 400), and nothing is charged", () =>
      Effect.gen(function* () {
        const key = `morsel_test_${"0".repeat(64)}`
        const unknownKey = yield* call("/v1/foods?q=rice", { headers: { authorization: `Bearer ${key}` } })
        expect([unknownKey.status, errorCode(unknownKey)]).toEqual([401, "invalid_key"])
        const malformed = yield* nutrition({ items: [{ query: "rice", grams: 1 }] }, { authorization: "Bearer nope" })
        expect(malformed.status).toBe(401)
        const badAndUnknown = yield* nutrition({ items: [] }, { authorization: `Bearer ${key}` })
        expect(badAndUnknown.status).toBe(400)
      }))
  })

  it.layer(serverLayer({ dependencies, env: { LIMIT_FOODS_PER_MINUTE: "3" } }), { timeout: 60_000 })("with LIMIT_FOODS_PER_MINUTE=3", (it) => {
    it.effect("the fourth call of a minute, on any of the three paths, is 429 rate_limited with Retry-After; bad input is still 400", () =>
      Effect.gen(function* () {
        // The calls are counted per minute of the clock: all four within one.
        yield* withinOneMinute(10_000)
        expect((yield* call("/v1/foods?q=rice")).status).toBe(200)
        expect((yield* call("/v1/foods/20045")).status).not.toBe(429)
        expect((yield* nutrition({ items: [{ query: "rice", grams: 100 }] })).status).toBe(200)
        const refused = yield* nutrition({ items: [{ query: "rice", grams: 100 }] })
        expect([refused.status, errorCode(refused)]).toEqual([429, "rate_limited"])
        const wait = Number(refused.headers.get("retry-after"))
        expect(wait).toBeGreaterThanOrEqual(1)
        expect(wait).toBeLessThanOrEqual(60)
        expect((yield* call("/v1/foods?q=")).status).toBe(400)
      }))
  })
})
