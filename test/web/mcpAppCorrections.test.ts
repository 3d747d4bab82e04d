// The App card's corrections in a real browser (Debian's Chromium) on the shipped foods: a component's grams changed
// and its food swapped from a search, both counted by the server's free food tools called through the host, and the
// corrected meal handed to the model. Every figure the card shows is compared with the server's own answer.
import { describe, expect, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/client"
import { Effect, Layer } from "effect"
import type { Frame, Page } from "playwright-core"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import type { AnalysisResult } from "../../src/domain/schemas.ts"
import { FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"
import type { FoodList, NutritionResult } from "../../src/foods/core/schemas.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { connect, fakeStripe, keyWith } from "../support/clients.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { cardRows, cardTotals, fmt, hasChromium, hostPage, launchChromium, offScreen, openHost, overflow, VIEWPORTS } from "../support/mcpAppPage.ts"
import { startServer } from "../support/server.ts"

const vision = Layer.succeed(VisionModel, { model: "fake-vision-1", analyze: () => Effect.succeed(chickenRice) })
// Real credits: the food tools check the connection's key against the ledger, as they do in production.
const dependencies = Layer.mergeAll(vision, FoodDbMemory(shippedFoods()), FundingLive, LimitsUnlimited)

type Four = { readonly kcal: number; readonly protein_g: number; readonly carbs_g: number; readonly fat_g: number }
const four = (n: Four): Four => ({ kcal: n.kcal, protein_g: n.protein_g, carbs_g: n.carbs_g, fat_g: n.fat_g })

/** A tool of the running server, called as any MCP client calls it (not through the card). */
const callTool = <A>(mcp: Client, name: string, args: Record<string, unknown>) =>
  Effect.promise(async () => {
    const result = await mcp.callTool({ name, arguments: args })
    if (result.isError) throw new Error(`${name} refused: ${JSON.stringify(result.structuredContent)}`)
    return result.structuredContent as A
  })

/** The rows and totals the card must show for an answer of food_nutrition, formatted as the card formats them. */
const expectedRows = (answer: NutritionResult) =>
  answer.items.map((item) => ({
    name: item.name,
    grams: String(item.grams),
    kcal: fmt(item.nutrition.kcal, 0),
    protein: fmt(item.nutrition.protein_g, 1),
    carbs: fmt(item.nutrition.carbs_g, 1),
    fat: fmt(item.nutrition.fat_g, 1)
  }))
const expectedTotals = (answer: NutritionResult) => [
  "Corrected total",
  fmt(answer.total_grams, 1),
  fmt(answer.totals.kcal, 0),
  fmt(answer.totals.protein_g, 1),
  fmt(answer.totals.carbs_g, 1),
  fmt(answer.totals.fat_g, 1)
]

const marks = (frame: Frame) => frame.$$eval("#rows tr", (trs) => trs.map((tr) => tr.classList.contains("corrected") && tr.textContent?.includes("Corrected")))

/** The card after a correction: the row marked and no count under way. */
const counted = (frame: Frame, row: number) =>
  Effect.promise(() => frame.waitForSelector(`#result[aria-busy="false"] #rows tr:nth-child(${row}).corrected`, { timeout: 30_000 }))

const evaluate = <A>(page: Page, script: string) => Effect.promise(() => page.evaluate(script) as Promise<A>)

describe.skipIf(!hasChromium)("the MCP App's corrections in a browser host", () => {
  it.scoped("grams changed and a food swapped on the card show the server's food_nutrition figures; the corrected meal goes to the model", () =>
    Effect.gen(function* () {
      const stripe = yield* fakeStripe
      const { url } = yield* startServer({ env: stripe.env, dependencies })
      const key = yield* keyWith(url, stripe, 500)
      const mcp = yield* connect(url, { authorization: `Bearer ${key}` })
      const html = yield* Effect.promise(hostPage)
      const browser = yield* launchChromium
      const photo = yield* Effect.promise(() => makeImage(1024, 768, "jpeg"))

      for (const viewport of VIEWPORTS) {
        const at = `at ${viewport.width} px`
        const { page, frame } = yield* openHost(browser, url, html, viewport, key)
        const args = { image_base64: photo.base64, mime_type: photo.mime, idempotency_key: `app-corrections-${viewport.width}` }
        const analysed = yield* evaluate<{ structuredContent: AnalysisResult }>(page, `host.callAsModel(${JSON.stringify(args)})`)
        const analysis = analysed.structuredContent
        // Every component has its database record on the shipped foods.
        expect(analysis.items.map((item) => item.nutrition_source)).toEqual(["usda", "usda", "usda"])
        yield* Effect.promise(() => frame.waitForSelector("#result:not([hidden])", { timeout: 30_000 }))
        expect(yield* Effect.promise(() => frame.isDisabled("#use-corrected")), at).toBe(true)

        // The chicken weighed 200 g, not 150: the card counts the meal again with food_nutrition.
        const chicken = frame.locator("#rows tr:nth-child(1) input")
        yield* Effect.promise(() => chicken.fill("200"))
        yield* Effect.promise(() => chicken.press("Tab"))
        yield* counted(frame, 1)
        const regrammed = analysis.items.map((item, i) => ({ fdc_id: item.fdc_id, grams: i === 0 ? 200 : item.estimated_grams, name: item.name }))
        const afterGrams = yield* callTool<NutritionResult>(mcp, "food_nutrition", { items: regrammed })
        expect(yield* Effect.promise(() => cardRows(frame)), at).toEqual(expectedRows(afterGrams))
        expect(yield* Effect.promise(() => cardTotals(frame)), at).toEqual(expectedTotals(afterGrams))
        expect(yield* Effect.promise(() => marks(frame)), at).toEqual([true, false, false])

        // The rice was tofu: "Swap food" searches with search_foods, and the first food found replaces it.
        yield* Effect.promise(() => frame.click("#rows tr:nth-child(2) .swap"))
        expect(yield* Effect.promise(() => frame.inputValue("#swap-query"))).toBe(analysis.items[1]!.query)
        yield* Effect.promise(() => frame.fill("#swap-query", "tofu"))
        yield* Effect.promise(() => frame.press("#swap-query", "Enter"))
        yield* Effect.promise(() => frame.waitForSelector("#swap-status:text('Foods for “tofu”')", { timeout: 30_000 }))
        const found = yield* callTool<typeof FoodList.Type>(mcp, "search_foods", { query: "tofu", limit: 8 })
        expect(found.foods.length).toBeGreaterThan(0)
        const listed = yield* Effect.promise(() => frame.$$eval("#swap-results button", (buttons) => buttons.map((b) => b.firstChild?.textContent)))
        expect(listed, at).toEqual(found.foods.map((food) => food.name))
        yield* Effect.promise(() => page.screenshot({ path: `test/artifacts/mcp-app-swap-${viewport.width}.png`, fullPage: true }))
        const tofu = found.foods[0]!
        yield* Effect.promise(() => frame.click("#swap-results li:first-child button"))
        yield* counted(frame, 2)
        expect(yield* Effect.promise(() => frame.isHidden("#swap"))).toBe(true)
        const swapped = regrammed.map((item, i) => (i === 1 ? { ...item, fdc_id: tofu.fdc_id, name: tofu.name } : item))
        const afterSwap = yield* callTool<NutritionResult>(mcp, "food_nutrition", { items: swapped })
        const rows = yield* Effect.promise(() => cardRows(frame))
        expect(rows[1]?.name, at).toBe(tofu.name)
        expect(rows, at).toEqual(expectedRows(afterSwap))
        expect(yield* Effect.promise(() => cardTotals(frame)), at).toEqual(expectedTotals(afterSwap))
        expect(yield* Effect.promise(() => marks(frame)), at).toEqual([true, true, false])
        expect(afterSwap.totals.kcal).not.toBe(afterGrams.totals.kcal)

        yield* Effect.promise(() => page.screenshot({ path: `test/artifacts/mcp-app-corrected-${viewport.width}.png`, fullPage: true }))
        expect(yield* Effect.promise(() => overflow(frame)), at).toBeLessThanOrEqual(0)
        expect(yield* Effect.promise(() => offScreen(frame)), at).toEqual([])

        // "Use corrected meal": the model's context gets the corrected meal, and the chat a message with its totals.
        yield* Effect.promise(() => frame.click("#use-corrected"))
        yield* Effect.promise(() => page.waitForFunction("host.messages.length === 1", undefined, { timeout: 30_000 }))
        const kcal = `${fmt(afterSwap.totals.kcal, 0)} kcal`
        const context = yield* evaluate<Array<{ content: Array<{ text: string }>; structuredContent: { corrected_meal: Record<string, unknown> } }>>(page, "host.modelContext")
        expect(context, at).toHaveLength(1)
        expect(context[0]!.structuredContent.corrected_meal).toMatchObject({
          request_id: analysis.request_id,
          dish_name: analysis.dish_name,
          totals: four(afterSwap.totals),
          total_grams: afterSwap.total_grams,
          items: afterSwap.items.map((item, i) => ({
            name: item.name,
            fdc_id: item.fdc_id,
            grams: item.grams,
            nutrition: four(item.nutrition),
            corrected: i < 2
          }))
        })
        expect(context[0]!.content[0]!.text).toContain(kcal)
        const messages = yield* evaluate<Array<{ role: string; content: Array<{ type: string; text: string }> }>>(page, "host.messages")
        expect(messages[0]!.role).toBe("user")
        expect(messages[0]!.content[0]!.text).toContain(kcal)
        expect(messages[0]!.content[0]!.text).toContain(`${analysis.items[1]!.name} → ${tofu.name}`)
        expect(yield* Effect.promise(() => frame.textContent("#correction-status"))).toBe("The corrected meal is in the chat.")
        // Everything the card asked of the server went through the host, to the two free tools only.
        const calls = yield* evaluate<Array<string>>(page, "host.appToolCalls")
        expect(new Set(calls)).toEqual(new Set(["search_foods", "food_nutrition"]))
        yield* Effect.promise(() => page.close())
      }
    }), 180_000)
})
