// The MCP App of analyze_food in a real browser (Debian's Chromium): a minimal host page with ext-apps' app bridge,
// connected to the running server's /mcp, shows the card; a photo picked inside it is analysed through the host.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { cardRows, fmt, hasChromium, hostPage, launchChromium, offScreen, openHost, overflow, VIEWPORTS } from "../support/mcpAppPage.ts"
import { startServer } from "../support/server.ts"

const vision = Layer.succeed(VisionModel, { model: "fake-vision-1", analyze: () => Effect.succeed(chickenRice) })
const dependencies = Layer.mergeAll(vision, FoodDbEmpty, FundingMemory({ alice: 10 }), LimitsUnlimited)

describe.skipIf(!hasChromium)("the MCP App in a browser host", () => {
  it.scoped("the card shows the tool's result; a phone photo picked in it is shrunk, analysed through the host and shown; without a key it says so", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies })
      const html = yield* Effect.promise(hostPage)
      const browser = yield* launchChromium
      // A phone photo for the App (it shrinks it); the REST call gets one within the API's limits.
      const photo = yield* Effect.promise(() => makeImage(4032, 3024, "jpeg"))
      const small = yield* Effect.promise(() => makeImage(1024, 768, "jpeg"))
      // What the API answers for this photo: the rows the card must show.
      const api = yield* Effect.promise(() =>
        send(`${url}/v1/analyze`, {
          headers: { authorization: "Bearer memory_alice", "idempotency-key": "app-test-rest-000001" },
          body: { image_base64: small.base64, mime_type: small.mime }
        })
      )
      expect(api.status).toBe(200)
      type Item = { name: string; estimated_grams: number; nutrition: { kcal: number; protein_g: number; carbs_g: number; fat_g: number } }
      const expected = (api.body as { items: Array<Item> }).items.map((item) => ({
        name: item.name,
        grams: String(item.estimated_grams),
        kcal: fmt(item.nutrition.kcal, 0),
        protein: fmt(item.nutrition.protein_g, 1),
        carbs: fmt(item.nutrition.carbs_g, 1),
        fat: fmt(item.nutrition.fat_g, 1)
      }))

      for (const viewport of VIEWPORTS) {
        const { page, frame } = yield* openHost(browser, url, html, viewport, "memory_alice")
        const host = yield* Effect.promise(() => page.evaluate("({ protocolVersion: host.protocolVersion, resourceMimeType: host.resourceMimeType })"))
        expect(host).toEqual({ protocolVersion: "2026-07-28", resourceMimeType: "text/html;profile=mcp-app" })

        // The model calls the tool; the host hands the result to the App, which shows it as the card.
        const asModel = { image_base64: small.base64, mime_type: small.mime, idempotency_key: `app-test-model-${viewport.width}` }
        yield* Effect.promise(() => page.evaluate(`host.callAsModel(${JSON.stringify(asModel)})`))
        yield* Effect.promise(() => frame.waitForSelector("#result:not([hidden])", { timeout: 30_000 }))
        expect(yield* Effect.promise(() => frame.textContent("#dish"))).toBe("Grilled chicken with rice")
        expect(yield* Effect.promise(() => cardRows(frame))).toEqual(expected)

        // A photo picked in the App: shrunk there, analysed through the host, shown on the card, handed to the model.
        yield* Effect.promise(() => frame.evaluate('document.getElementById("rows").replaceChildren()'))
        yield* Effect.promise(() => frame.setInputFiles("#photo", { name: "meal.jpg", mimeType: "image/jpeg", buffer: photo.bytes }))
        yield* Effect.promise(() => page.waitForFunction("host.modelContext.length === 1", undefined, { timeout: 30_000 }))
        expect(yield* Effect.promise(() => cardRows(frame))).toEqual(expected)
        expect(yield* Effect.promise(() => frame.textContent("#photo-status"))).toMatch(/^4032 × 3024 px, .* Shrunk to/)
        expect(yield* Effect.promise(() => frame.textContent(".disclaimer"))).toContain("Every figure is an estimate")
        expect(yield* Effect.promise(() => frame.$$eval("#rows .source > span", (cells) => cells.map((c) => c.textContent)))).toEqual(
          expected.map(() => "AI estimate")
        )
        const context = yield* Effect.promise(() => page.evaluate("host.modelContext"))
        expect(context).toEqual([{ structuredContent: expect.objectContaining({ dish_name: "Grilled chicken with rice" }) }])
        yield* Effect.promise(() => page.screenshot({ path: `test/artifacts/mcp-app-${viewport.width}.png`, fullPage: true }))
        // Nothing wider than the screen: the card fits a phone.
        expect(yield* Effect.promise(() => overflow(frame)), `at ${viewport.width} px`).toBeLessThanOrEqual(0)
        expect(yield* Effect.promise(() => offScreen(frame)), `at ${viewport.width} px`).toEqual([])
        yield* Effect.promise(() => page.close())
      }

      // A connection without a key: the card says so in words, and shows no result.
      const { page, frame } = yield* openHost(browser, url, html, VIEWPORTS[1], "")
      yield* Effect.promise(() => frame.setInputFiles("#photo", { name: "meal.jpg", mimeType: "image/jpeg", buffer: small.bytes }))
      yield* Effect.promise(() => frame.waitForSelector("#message:not([hidden])", { timeout: 30_000 }))
      expect(yield* Effect.promise(() => frame.textContent("#message"))).toMatch(/credit key/)
      expect(yield* Effect.promise(() => frame.isHidden("#result"))).toBe(true)
      expect(yield* Effect.promise(() => page.evaluate("host.modelContext.length"))).toBe(0)
    }), 180_000)
})
