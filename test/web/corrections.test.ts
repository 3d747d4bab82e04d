// Correcting a result on the web page, in Debian's Chromium at 390×844 and 1280×900 against the sandbox in this
// process: an item's grams typed and its food replaced from a search, the nine more nutrients of its USDA items. What
// the page shows is what POST /v1/nutrition answers for the same items, asked by the test itself; the food calls go
// without the credit key. (A meal in words: words.test.ts.)
import { existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { HttpServer } from "@effect/platform"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AppConfigFromEnv } from "../../src/config.ts"
import { LoggingLive } from "../../src/logging.ts"
import { SandboxLive } from "../../src/sandbox/Sandbox.ts"
import { makeImage } from "../support/images.ts"
import { freePort, root } from "../support/process.ts"

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium"
const artifacts = join(root, "test/artifacts")
const PHONE = { width: 390, height: 844 }
const DESKTOP = { width: 1280, height: 900 }

if (!existsSync(CHROMIUM)) console.warn(`NOTICE: correction browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`)

interface Nutrition {
  readonly [nutrient: string]: number | null
  readonly kcal: number
  readonly protein_g: number
  readonly carbs_g: number
  readonly fat_g: number
}
interface Analysis {
  readonly items: ReadonlyArray<{
    readonly name: string
    readonly estimated_grams: number
    readonly nutrition_source: string
    readonly fdc_id: string | null
    readonly nutrition: Nutrition
  }>
  readonly totals: Nutrition
  readonly estimated_total_grams: number
}
interface Suggestion {
  readonly fdc_id: string
  readonly name: string
}
interface Counted {
  readonly items: ReadonlyArray<{ readonly name: string; readonly grams: number; readonly matched_name: string; readonly nutrition: Nutrition }>
  readonly totals: Nutrition
  readonly total_grams: number
  readonly unmatched: ReadonlyArray<{ readonly index: number; readonly suggestions: ReadonlyArray<Suggestion> }>
}
type Item = { readonly name: string } & ({ readonly query: string } | { readonly fdc_id: string }) &
  ({ readonly grams: number } | { readonly portion: { readonly amount: number; readonly unit: string } })

/** The nine more nutrients, with the units and digits the page writes them in. */
const MORE: ReadonlyArray<readonly [string, string, number]> = [
  ["fiber_g", "g", 1],
  ["sugars_g", "g", 1],
  ["saturated_fat_g", "g", 1],
  ["sodium_mg", "mg", 0],
  ["cholesterol_mg", "mg", 0],
  ["potassium_mg", "mg", 0],
  ["calcium_mg", "mg", 0],
  ["iron_mg", "mg", 1],
  ["vitamin_c_mg", "mg", 1]
]

// Figures as the page writes them: kcal whole, the rest in tenths, en-US grouping.
const fixed = (n: number, digits: number) => n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
const one = (n: number) => fixed(n, 1)
const figures = (n: Nutrition) => [fixed(n.kcal, 0), one(n.protein_g), one(n.carbs_g), one(n.fat_g)]
/** A corrected meal's totals as the page adds them up: the figures shown for each item, summed to hundredths. */
const hundredth = (v: number) => Math.round(Number((v * 100).toPrecision(12))) / 100
const summed = (shown: ReadonlyArray<Nutrition>): Nutrition => {
  const sum = (key: "kcal" | "protein_g" | "carbs_g" | "fat_g") => hundredth(shown.reduce((total, n) => total + n[key], 0))
  return { kcal: sum("kcal"), protein_g: sum("protein_g"), carbs_g: sum("carbs_g"), fat_g: sum("fat_g") }
}
/** The share of energy from protein the chart's legend states for these totals. */
const proteinShare = (t: Nutrition) => Math.round((t.protein_g * 4 * 100) / (t.protein_g * 4 + t.carbs_g * 4 + t.fat_g * 9))

// What the browser shows is read in the page (this project's TypeScript has no DOM types): a few expressions.

/** Each item row's cells as the person reads them. */
const rows = (page: Page) =>
  page.evaluate<ReadonlyArray<ReadonlyArray<string>>>(`Array.from(document.querySelectorAll("#rows tr"), (tr) => Array.from(tr.querySelectorAll("td"), (td) => td.innerText.trim()))`)

/** The total row: its label, grams, kcal, protein, carbs and fat. */
const totals = (page: Page) =>
  page.evaluate<ReadonlyArray<string>>(`Array.from(document.querySelectorAll("#totals th, #totals td"), (c) => c.innerText.trim()).slice(0, 6)`)

/** Whether anything reaches past the right edge, and whether every figure of the items and total lies within the screen. */
const fits = (page: Page) =>
  page.evaluate<{ readonly sideways: boolean; readonly outside: ReadonlyArray<string> }>(`({
    sideways: document.documentElement.scrollWidth > document.documentElement.clientWidth,
    outside: Array.from(document.querySelectorAll("#rows td, #totals th, #totals td, #editor, #incomplete"))
      .filter((el) => el.offsetParent !== null && el.innerText.trim() !== "")
      .filter((el) => { const box = el.getBoundingClientRect(); return box.left < 0 || box.right > document.documentElement.clientWidth })
      .map((el) => el.innerText.trim().slice(0, 40))
  })`)

/** Buttons, fields and menus on screen that are less than 44 px high or wide. */
const smallTargets = (page: Page) =>
  page.evaluate<ReadonlyArray<string>>(`
    Array.from(document.querySelectorAll("button, input, select, textarea"))
      .filter((el) => el.offsetParent !== null)
      .filter((el) => { const box = el.getBoundingClientRect(); return box.height < 44 || box.width < 44 })
      .map((el) => el.id || el.textContent)`)

describe.skipIf(!existsSync(CHROMIUM))("correcting a result, in a browser", () => {
  let browser: Browser
  let url = ""
  let stop = async () => {}

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true })
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"]
    })
    // The sandbox on a known port: its checkout returns to PUBLIC_BASE_URL.
    const port = await freePort()
    const env = { HOST: "127.0.0.1", PORT: String(port), LOG_LEVEL: "error" }
    const layer = SandboxLive(env, { banner: false, indexBuilt: true }).pipe(Layer.provide(LoggingLive.pipe(Layer.provide(AppConfigFromEnv(env)))))
    const scope = Effect.runSync(Scope.make())
    const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
    expect(Context.get(context, HttpServer.HttpServer).address).toMatchObject({ port })
    url = `http://127.0.0.1:${port}`
    stop = () => Effect.runPromise(Scope.close(scope, Exit.void))
  }, 120_000)

  afterAll(async () => {
    await browser?.close()
    await stop()
  })

  const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 30_000, interval: 100 })

  /** What the service answers any client for these items. */
  const nutrition = async (items: ReadonlyArray<Item>): Promise<Counted> => {
    const answer = await fetch(`${url}/v1/nutrition`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ items }) })
    expect(answer.status).toBe(200)
    return (await answer.json()) as Counted
  }

  /** A page whose food calls are recorded with the authorization they carried. */
  const newPage = async (viewport: { width: number; height: number }) => {
    const page = await browser.newPage({ viewport })
    const foodCalls: Array<{ path: string; authorization: string | undefined }> = []
    page.on("request", (request) => {
      const path = new URL(request.url()).pathname
      if (path.startsWith("/v1/foods") || path === "/v1/nutrition") foodCalls.push({ path, authorization: request.headers()["authorization"] })
    })
    return { page, foodCalls }
  }

  /** A key with credits bought through the page and the sandbox checkout, then a photo analysed: the API's answer. */
  const analysed = async (page: Page): Promise<Analysis> => {
    await page.goto(`${url}/`)
    await poll(() => page.locator("#sandbox-banner").isVisible()).toBe(true)
    await page.getByRole("button", { name: "Generate a new key" }).click()
    await page.getByRole("button", { name: "Buy 500 credits (USD 5.00)" }).first().click()
    await page.waitForURL(/\/sandbox\/checkout\/cs_test_/)
    await page.getByRole("button", { name: /Pay/ }).click()
    await page.waitForURL(`${url}/`)
    await poll(() => page.locator("#key-status").textContent()).toBe("Balance: 500 credits.")
    const photo = await makeImage(800, 600, "jpeg")
    await page.locator("input[type=file]").setInputFiles({ name: "lunch.jpg", mimeType: "image/jpeg", buffer: photo.bytes })
    await poll(() => page.locator("#photo-status").textContent()).toContain("800 × 600 px")
    const answer = page.waitForResponse((r) => r.url().endsWith("/v1/analyze") && r.status() === 200)
    await page.locator("button", { hasText: "Analy" }).click()
    const result = (await (await answer).json()) as Analysis
    await poll(async () => (await rows(page)).length).toBe(result.items.length)
    return result
  }

  for (const [name, viewport] of [["phone", PHONE], ["desktop", DESKTOP]] as const) {
    it(`${name} (${viewport.width}×${viewport.height}): an item's grams and food corrected, the totals those of POST /v1/nutrition, then undone`, async () => {
      const { page, foodCalls } = await newPage(viewport)
      try {
        const result = await analysed(page)
        // The sandbox's meals are everyday plates the USDA copy answers: every item has its record.
        expect(result.items.every((i) => i.nutrition_source === "usda" && i.fdc_id !== null)).toBe(true)
        expect(await totals(page)).toEqual(["Total", one(result.estimated_total_grams), ...figures(result.totals)])
        const items: Array<Item> = result.items.map((i) => ({ fdc_id: i.fdc_id ?? "", grams: i.estimated_grams, name: i.name }))
        // The nine more nutrients of the USDA items, as the service counts them for the same records and grams.
        const more = await nutrition(items)
        await poll(() => page.locator("#more").isVisible()).toBe(true)
        await page.locator("#more summary").click()
        expect(await page.locator("#more-note").textContent()).toBe("Totals of the foods counted, from their USDA records.")
        expect(await page.locator("#more dd").allTextContents()).toEqual(
          MORE.map(([key, unit, digits]) => `${more.totals[key] === null ? "at least " : ""}${fixed(more.items.reduce((s, i) => s + (i.nutrition[key] ?? 0), 0), digits)} ${unit}`)
        )
        expect(await page.locator("#more-items li").count()).toBe(result.items.length)

        // The last item's grams: its figures, the totals and the chart follow.
        const k = result.items.length - 1
        const item = result.items[k]!
        await page.getByRole("button", { name: `Correct ${item.name}` }).click()
        expect(await page.locator("#edit-grams").inputValue()).toBe(String(item.estimated_grams))
        const grams = item.estimated_grams + 65
        await page.locator("#edit-grams").fill(String(grams))
        items[k] = { fdc_id: item.fdc_id ?? "", grams, name: item.name }
        const regrammed = await nutrition(items)
        expect(regrammed.totals.kcal).not.toBe(result.totals.kcal)
        // The other items keep the analysis's own figures; the totals add up what is shown.
        const afterGrams = summed([...result.items.slice(0, k).map((i) => i.nutrition), regrammed.items[k]!.nutrition])
        await poll(() => totals(page)).toEqual(["Total", one(regrammed.total_grams), ...figures(afterGrams)])
        const seen = await rows(page)
        expect(seen[k]!.slice(0, 6)).toEqual([`${item.name} corrected`, one(grams), ...figures(regrammed.items[k]!.nutrition)])
        expect(seen.slice(0, k).map((r) => r[0])).toEqual(result.items.slice(0, k).map((i) => i.name))
        expect(await page.locator("#chart-caption").textContent()).toContain(`Protein ${proteinShare(regrammed.totals)} % of energy`)

        // The first item's food replaced by a search's first answer: its name, source and mark change.
        await page.getByRole("button", { name: `Correct ${result.items[0]!.name}` }).click()
        await page.locator("#food-query").fill("tofu")
        await page.getByRole("button", { name: "Search", exact: true }).click()
        const search = (await (await fetch(`${url}/v1/foods?q=tofu&limit=8`)).json()) as { foods: ReadonlyArray<Suggestion> }
        await poll(() => page.locator("#found button").count()).toBe(search.foods.length)
        const tofu = search.foods[0]!
        expect(await page.evaluate<string>('document.querySelector("#found button").firstChild.textContent')).toBe(tofu.name)
        await page.locator("#found button").first().click()
        items[0] = { fdc_id: tofu.fdc_id, grams: result.items[0]!.estimated_grams, name: tofu.name }
        const swapped = await nutrition(items)
        const afterSwap = summed([swapped.items[0]!.nutrition, ...result.items.slice(1, k).map((i) => i.nutrition), regrammed.items[k]!.nutrition])
        await poll(() => totals(page)).toEqual(["Total", one(swapped.total_grams), ...figures(afterSwap)])
        const first = (await rows(page))[0]!
        expect(first.slice(0, 7)).toEqual([`${tofu.name} corrected`, one(result.items[0]!.estimated_grams), ...figures(swapped.items[0]!.nutrition), `USDA\n${tofu.name}`])
        expect(await page.locator("#edit-status").textContent()).toBe(`Replaced with “${tofu.name}”.`)
        expect(await page.locator("#corrected-note").textContent()).toContain("2 items corrected by you")
        expect(await fits(page)).toEqual({ sideways: false, outside: [] })
        if (name === "phone") expect(await smallTargets(page)).toEqual([])
        await page.screenshot({ path: join(artifacts, `web-page-corrected-${name}.png`), fullPage: true })

        // One item undone, then all: the analysis's own figures again, nothing marked.
        await page.getByRole("button", { name: "Undo changes to this item" }).click()
        await poll(() => totals(page)).toEqual(["Total", one(regrammed.total_grams), ...figures(afterGrams)])
        await page.getByRole("button", { name: "Undo all corrections" }).click()
        await poll(() => totals(page)).toEqual(["Total", one(result.estimated_total_grams), ...figures(result.totals)])
        expect((await rows(page)).map((r) => r[0])).toEqual(result.items.map((i) => i.name))
        expect(await page.locator("#rows .badge").count()).toBe(0)

        // Free calls: the credit key stays out of them, and the balance paid for the analysis only.
        // The first is the more nutrients of the analysis's items.
        expect(foodCalls.map((c) => c.path)).toEqual(["/v1/nutrition", "/v1/nutrition", "/v1/foods", "/v1/nutrition"])
        expect(foodCalls.every((c) => c.authorization === undefined)).toBe(true)
        await page.getByRole("button", { name: "Refresh balance" }).click()
        await poll(() => page.locator("#key-status").textContent()).toBe("Balance: 499 credits.")
      } finally {
        await page.close()
      }
    }, 180_000)
  }

  it("a component the model estimated keeps its own figures per 100 g, scaled to the grams typed; grams the service would refuse are not sent", async () => {
    const { page, foodCalls } = await newPage(PHONE)
    try {
      // An analysis with a dish SR28 lacks (the model's own figures) beside a USDA food, as the service answers one.
      const rice = await nutrition([{ fdc_id: "20045", grams: 150, name: "Rice" }])
      const shawarma = { kcal: 215.5, protein_g: 18.3, carbs_g: 4.7, fat_g: 13.9 }
      // The service's arithmetic (src/foods/core/arithmetic.ts): per 100 g scaled and summed, in tenths.
      const tenth = (v: number) => Math.round(v * 10) / 10
      const own = (grams: number): Nutrition => ({
        kcal: tenth((shawarma.kcal * grams) / 100),
        protein_g: tenth((shawarma.protein_g * grams) / 100),
        carbs_g: tenth((shawarma.carbs_g * grams) / 100),
        fat_g: tenth((shawarma.fat_g * grams) / 100)
      })
      const add = (a: Nutrition, b: Nutrition): Nutrition => ({
        kcal: tenth(a.kcal + b.kcal),
        protein_g: tenth(a.protein_g + b.protein_g),
        carbs_g: tenth(a.carbs_g + b.carbs_g),
        fat_g: tenth(a.fat_g + b.fat_g)
      })
      const result = {
        request_id: "req_ai_1",
        dish_name: "Chicken shawarma with rice",
        items: [
          { name: "Chicken shawarma", query: "chicken shawarma", estimated_grams: 200, model_confidence: 0.7, nutrition_source: "ai", fdc_id: null, matched_name: null, per_100g: shawarma, nutrition: own(200) },
          { ...rice.items[0], estimated_grams: 150, model_confidence: 0.8, nutrition_source: "usda", grams: undefined }
        ],
        totals: add(own(200), rice.totals),
        estimated_total_grams: 350,
        estimate: true,
        model: "sandbox",
        matcher_version: "usda-match-4",
        processing_ms: 5
      }
      await page.route("**/v1/analyze", (route) => route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify(result) }))
      await page.goto(`${url}/`)
      await poll(() => page.locator("#sandbox-banner").isVisible()).toBe(true)
      await page.locator("input[type=file]").setInputFiles({ name: "lunch.jpg", mimeType: "image/jpeg", buffer: (await makeImage(320, 240, "jpeg")).bytes })
      await poll(() => page.locator("#photo-status").textContent()).toContain("320 × 240 px")
      await page.locator("button", { hasText: "Analy" }).click()
      await poll(() => totals(page)).toEqual(["Total", "350.0", ...figures(result.totals)])

      await page.getByRole("button", { name: "Correct Chicken shawarma" }).click()
      for (const refused of ["0", "5001", "12.345"]) {
        await page.locator("#edit-grams").fill(refused)
        expect(await page.locator("#edit-grams").getAttribute("aria-invalid")).toBe("true")
        expect(await page.locator("#edit-status").textContent()).toBe("Grams: from 0.01 to 5000, at most two decimals.")
      }
      await page.locator("#edit-grams").fill("123.4")
      await poll(() => totals(page)).toEqual(["Total", "273.4", ...figures(add(own(123.4), rice.totals))])
      expect((await rows(page))[0]!.slice(0, 7)).toEqual(["Chicken shawarma corrected", "123.4", ...figures(own(123.4)), "AI estimate"])
      expect(await page.locator("#corrected-note").textContent()).toBe(
        "1 item corrected by you: counted from the USDA record and the grams you chose; a component the model estimated keeps its own figures per 100 g."
      )
      // Nothing of this was looked up: the model's figures are the page's to scale. The one call is the more nutrients of the rice.
      expect(foodCalls).toEqual([{ path: "/v1/nutrition", authorization: undefined }])
    } finally {
      await page.close()
    }
  }, 120_000)
})
