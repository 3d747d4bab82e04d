// The free food tools at /mcp through the official MCP client: search_foods and food_nutrition on the shipped SR28 copy,
// their refusals as tool errors with the REST codes, the shared LIMIT_FOODS_PER_MINUTE budget, and no model call.
import { describe, expect, layer } from "@effect/vitest"
import type { CallToolResult } from "@modelcontextprotocol/client"
import { Context, Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { connect, firstText, toolErrorCode } from "../support/clients.ts"
import { type FakeOpenAI, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { isRecord, send } from "../support/http.ts"
import { withinOneMinute } from "../support/minute.ts"
import { startServer } from "../support/server.ts"
import { lesserHolds } from "../foods/loopHold.ts"

const MORE = ["fiber_g", "sugars_g", "saturated_fat_g", "sodium_mg", "cholesterol_mg", "potassium_mg", "calcium_mg", "iron_mg", "vitamin_c_mg"]
const records = shippedFoods()

class Service extends Context.Tag("test/McpFoods")<Service, { readonly url: string; readonly model: FakeOpenAI }>() {}

const serviceWith = (env: Record<string, string>) =>
  Layer.scoped(
    Service,
    Effect.gen(function* () {
      const model = yield* startFakeOpenAI()
      const { url } = yield* startServer({
        env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: model.url, VISION_MODEL: "fake-vision-1", ...env },
        dependencies: Layer.mergeAll(VisionModelLive, FoodDbMemory(records), FundingMemory({}), LimitsUnlimited)
      })
      return { url, model }
    })
  )

const callTool = (name: string, args: Record<string, unknown>, headers: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const { url } = yield* Service
    const mcp = yield* connect(url, headers)
    return (yield* Effect.promise(() => mcp.callTool({ name, arguments: args }))) as CallToolResult
  })

const content = (result: CallToolResult): Record<string, unknown> => (isRecord(result.structuredContent) ? result.structuredContent : {})
const errorMessage = (result: CallToolResult): string => {
  const error = content(result)["error"]
  return isRecord(error) ? String(error["message"]) : ""
}

describe("MCP food tools", () => {
  layer(serviceWith({}), { excludeTestServices: true, timeout: 120_000 })("on the shipped SR28 copy", (it) => {
    it.scoped("tools/list shows the three tools; the two food tools are read-only, free, closed-world, with output schemas, for the model and the App", () =>
      Effect.gen(function* () {
        const { url } = yield* Service
        const mcp = yield* connect(url)
        const { tools } = yield* Effect.promise(() => mcp.listTools())
        expect(tools.map((t) => t.name)).toEqual(["analyze_food", "search_foods", "food_nutrition"])
        for (const name of ["search_foods", "food_nutrition"]) {
          const tool = tools.find((t) => t.name === name)!
          expect(tool.title).toBeTruthy()
          expect(tool.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false })
          expect(tool.outputSchema).toMatchObject({ type: "object", anyOf: expect.any(Array) })
          expect(tool.description).toContain("Free")
          // MCP Apps: analyze_food's card calls them through the host to correct a result.
          expect(tool._meta?.["ui"]).toEqual({ visibility: ["model", "app"] })
        }
        expect(tools[1]!.inputSchema).toMatchObject({ type: "object", required: ["query"], additionalProperties: false })
        expect(Object.keys(tools[1]!.inputSchema.properties ?? {}).sort()).toEqual(["limit", "query"])
        expect(tools[2]!.inputSchema).toMatchObject({ type: "object", properties: { items: { maxItems: 20 }, text: { type: "string" } } })
        expect(tools[2]!.description).toContain("the user's own words about what they ate, passed as they are")
      }))

    it.scoped("food_nutrition reads a meal in words: each food with its words and grams_basis, the unread ones in unmatched; refusals name text", () =>
      Effect.gen(function* () {
        const { model, url } = yield* Service
        const before = model.requests.length
        const result = yield* callTool("food_nutrition", { text: "2 eggs, a slice of toast with butter and a cortado" })
        expect(result.isError ?? false).toBe(false)
        const body = content(result)
        const items = body["items"] as Array<{ text: string; grams: number; grams_basis: string }>
        expect(items.map((i) => [i.text, i.grams, i.grams_basis])).toEqual([
          ["2 eggs", 88, "portion"],
          ["a slice of toast", 22, "portion"],
          ["butter", 5, "typical"]
        ])
        expect(body["complete"]).toBe(false)
        expect((body["unmatched"] as Array<{ index: number; text: string }>).map((u) => [u.index, u.text])).toEqual([[3, "a cortado"]])
        // The same answer as REST's.
        const rest = yield* Effect.promise(() => send(`${url}/v1/nutrition`, { method: "POST", body: { text: "2 eggs, a slice of toast with butter and a cortado" } }))
        expect(rest.body).toEqual(result.structuredContent)
        expect(model.requests.length).toBe(before)
        for (const args of [{ text: " " }, { text: "x".repeat(2001) }, { text: Array.from({ length: 21 }, () => "an egg").join(", ") }, { text: "an egg", items: [{ query: "egg", grams: 50 }] }]) {
          const refused = yield* callTool("food_nutrition", args)
          expect([refused.isError, toolErrorCode(refused)]).toEqual([true, "invalid_request"])
          expect(errorMessage(refused)).toContain("text")
        }
      }))

    it.scoped("search_foods \"tofu\": a plain tofu first (as REST answers), each food with the 13-nutrient per_100g; structuredContent and JSON text agree; no model call", () =>
      Effect.gen(function* () {
        const { model } = yield* Service
        const before = model.requests.length
        const result = yield* callTool("search_foods", { query: "tofu", limit: 5 })
        expect(result.isError ?? false).toBe(false)
        expect(firstText(result)).toEqual(result.structuredContent)
        const foods = content(result)["foods"] as Array<{ fdc_id: string; name: string; per_100g: Record<string, unknown> }>
        expect(foods.length).toBeGreaterThan(0)
        expect(foods.length).toBeLessThanOrEqual(5)
        expect(foods[0]!.name.toLowerCase()).toContain("tofu")
        expect(foods[0]!.name).not.toMatch(/fermented|fuyu/i)
        // The same answer as REST's GET /v1/foods.
        const { url } = yield* Service
        const rest = yield* Effect.promise(() => send(`${url}/v1/foods?q=tofu&limit=5`))
        expect(rest.body).toEqual(result.structuredContent)
        for (const food of foods) {
          expect(Object.keys(food.per_100g).sort()).toEqual(["kcal", "protein_g", "carbs_g", "fat_g", ...MORE].sort())
        }
        expect(model.requests.length).toBe(before)
      }))

    it.scoped("food_nutrition with grams and with a portion (2 large eggs) answers items and totals", () =>
      Effect.gen(function* () {
        const { model } = yield* Service
        const before = model.requests.length
        const result = yield* callTool("food_nutrition", {
          items: [
            { query: "rice, white, cooked", grams: 150 },
            { query: "egg", portion: { amount: 2, unit: "large" } }
          ]
        })
        expect(result.isError ?? false).toBe(false)
        const body = content(result)
        expect(body).toMatchObject({ complete: true, estimate: true, unmatched: [] })
        const items = body["items"] as Array<{ grams: number; portion?: { amount: number; unit: string }; nutrition: { kcal: number } }>
        expect(items).toHaveLength(2)
        expect(items[0]!.grams).toBe(150)
        expect(items[1]!.portion).toMatchObject({ amount: 2 })
        expect(items[1]!.grams).toBeGreaterThan(80)
        expect(items[1]!.grams).toBeLessThan(120)
        const totals = body["totals"] as { kcal: number }
        expect(totals.kcal).toBeCloseTo(items[0]!.nutrition.kcal + items[1]!.nutrition.kcal, 0)
        expect(body["total_grams"]).toBeCloseTo(items[0]!.grams + items[1]!.grams, 1)
        expect(model.requests.length).toBe(before)
      }))

    it.scoped("refusals are tool errors with the REST codes: an unknown fdc_id, a bad limit, a bad item, an unknown key", () =>
      Effect.gen(function* () {
        const unknown = yield* callTool("food_nutrition", { items: [{ fdc_id: "99999999", grams: 100 }] })
        expect([unknown.isError, toolErrorCode(unknown)]).toEqual([true, "food_not_found"])
        expect(firstText(unknown)).toEqual(unknown.structuredContent)

        const badLimit = yield* callTool("search_foods", { query: "rice", limit: 26 })
        expect([badLimit.isError, toolErrorCode(badLimit)]).toEqual([true, "invalid_request"])
        expect(errorMessage(badLimit)).toBe("limit: a whole number from 1 to 25")

        const empty = yield* callTool("search_foods", { query: "" })
        expect([empty.isError, toolErrorCode(empty)]).toEqual([true, "invalid_request"])
        expect(errorMessage(empty)).toBe("query: a food text of 1 to 200 characters is required")

        const grams = yield* callTool("food_nutrition", { items: [{ query: "rice", grams: 6000 }] })
        expect([grams.isError, toolErrorCode(grams)]).toEqual([true, "invalid_request"])
        expect(errorMessage(grams)).toBe("items.0.grams: from 0.01 to 5000")

        const key = `morsel_live_${"0".repeat(64)}`
        const badKey = yield* callTool("search_foods", { query: "rice" }, { authorization: `Bearer ${key}` })
        expect([badKey.isError, toolErrorCode(badKey)]).toEqual([true, "invalid_key"])
      }))

    // Arguments past the bounds are refused by their count and size before any item is decoded, as REST refuses a
    // body: 890,000 empty items (2.7 MB, the most a call may send) held the server 6-7 s while each was decoded.
    it.scoped(
      "a call of more than 20 items or over 64 KB is refused with invalid_request at once, before any item is decoded",
      () =>
        Effect.gen(function* () {
          const { url } = yield* Service
          const mcp = yield* connect(url)
          const empties = Array.from({ length: 890_000 }, () => ({}))
          const AT_MOST_20 = "items: at most 20 items"
          const OVER_64_KB = "the arguments take more than 65536 characters as JSON"
          const calls: ReadonlyArray<readonly [string, Record<string, unknown>, string, boolean]> = [
            ["food_nutrition", { items: Array.from({ length: 20_000 }, () => ({ query: "rice", grams: "x" })) }, AT_MOST_20, false],
            ["food_nutrition", { items: Array.from({ length: 21 }, () => ({ query: "rice", grams: 100 })) }, AT_MOST_20, true],
            ["food_nutrition", { items: [{ query: "rice", grams: 100, name: "x".repeat(70_000) }] }, OVER_64_KB, true],
            ["food_nutrition", { items: [{ query: "rice", grams: 100 }], more: Array.from({ length: 9_000 }, () => ({ a: [1, 2] })) }, OVER_64_KB, true],
            ["search_foods", { query: "rice", limit: 3, more: "x".repeat(70_000) }, OVER_64_KB, true]
          ]
          // Warm: the first calls compile the code they run (the client's here too).
          yield* Effect.promise(() => mcp.callTool({ name: "food_nutrition", arguments: { items: empties.slice(0, 30) } }))
          // 890,000 empty items (2.7 MB, the most a call may send) are refused by their count before the body is
          // parsed, as a JSON-RPC error of the request itself (the loop is not watched here: the client's own
          // serialising of the call, in this process, takes longer than the server's refusal).
          {
            const started = performance.now()
            const refused = yield* Effect.promise(() => mcp.callTool({ name: "food_nutrition", arguments: { items: empties } }).then(() => "answered", (e: Error) => e.message))
            expect(refused).toContain("more than 50000 objects and arrays")
            expect(performance.now() - started).toBeLessThan(5000)
          }
          // Each call is sent twice (a refusal is not remembered), each watched alone: the lesser hold counts.
          for (const [tool, args, message, watched] of calls) {
            const refuse = async () => {
              const started = performance.now()
              const refused = (await mcp.callTool({ name: tool, arguments: args })) as CallToolResult
              return { refused, ms: performance.now() - started }
            }
            const [hold] = yield* Effect.promise(() =>
              lesserHolds([{ label: message, calls: [refuse, refuse] }], ({ ms, refused }) => {
                console.log(`${tool} refused in ${ms.toFixed(0)} ms: ${message}`)
                expect([refused.isError, toolErrorCode(refused), errorMessage(refused)]).toEqual([true, "invalid_request", message])
                expect(ms).toBeLessThan(5000)
              })
            )
            const cpuMs = hold?.cpuMs ?? Number.POSITIVE_INFINITY
            console.log(`${tool}: the loop held at most ${cpuMs.toFixed(1)} ms CPU (the lesser of two calls)`)
            if (watched) expect(cpuMs).toBeLessThanOrEqual(50)
          }
        }),
      120_000
    )
  })

  layer(serviceWith({ LIMIT_FOODS_PER_MINUTE: "3" }), { excludeTestServices: true, timeout: 120_000 })("with LIMIT_FOODS_PER_MINUTE=3", (it) => {
    it.scoped("the fourth food call of a minute, on either tool, is rate_limited with retry_after_seconds; bad input is still invalid_request", () =>
      Effect.gen(function* () {
        yield* withinOneMinute()
        expect((yield* callTool("search_foods", { query: "rice" })).isError ?? false).toBe(false)
        expect((yield* callTool("food_nutrition", { items: [{ query: "rice", grams: 100 }] })).isError ?? false).toBe(false)
        expect((yield* callTool("search_foods", { query: "milk" })).isError ?? false).toBe(false)
        const refused = yield* callTool("food_nutrition", { items: [{ query: "rice", grams: 100 }] })
        expect([refused.isError, toolErrorCode(refused)]).toEqual([true, "rate_limited"])
        const wait = content(refused)["retry_after_seconds"]
        expect(wait).toBeGreaterThanOrEqual(1)
        expect(wait).toBeLessThanOrEqual(60)
        const bad = yield* callTool("search_foods", { query: "" })
        expect(toolErrorCode(bad)).toBe("invalid_request")
      }))
  })
})
