// A meal in words on the web page, in Debian's Chromium at 390×844 and 1280×900 against the sandbox in this process:
// the person's sentence is sent as it stands to POST /v1/nutrition, each food shown with what was read from it, the
// foods it could not read beside the totals, one food's words fixed without losing the others; and a photo's result
// with the nine more nutrients of its USDA items. What the page shows is what the service answers the test itself.
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

if (!existsSync(CHROMIUM)) console.warn(`NOTICE: meal-in-words browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`)

type Nutrition = Readonly<Record<string, number | null>> & { readonly kcal: number; readonly protein_g: number; readonly carbs_g: number; readonly fat_g: number }
interface Suggestion {
  readonly fdc_id: string
  readonly name: string
}
interface Read {
  readonly text: string
  readonly query: string
  readonly fdc_id: string
  readonly matched_name: string
  readonly grams: number
  readonly grams_basis: "stated" | "portion" | "typical"
  readonly portion?: { readonly amount: number; readonly unit: string; readonly grams: number }
  readonly nutrition: Nutrition
}
interface Answer {
  readonly items: ReadonlyArray<Read>
  readonly totals: Nutrition
  readonly total_grams: number
  readonly unmatched: ReadonlyArray<{ readonly index: number; readonly text: string; readonly query: string; readonly suggestions: ReadonlyArray<Suggestion> }>
}

// Figures as the page writes them: kcal whole, the rest in tenths, en-US grouping.
const fixed = (n: number, digits: number) => n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
const one = (n: number) => fixed(n, 1)
const figures = (n: Nutrition) => [fixed(n.kcal, 0), one(n.protein_g), one(n.carbs_g), one(n.fat_g)]
const tenth = (v: number) => Math.round(v * 10) / 10

/** What the page says was read from a food's words, by the basis of its grams. */
const readLine = (item: Read) => {
  const read = `${item.text} → ${item.grams} g`
  if (item.grams_basis === "stated") return read
  if (item.grams_basis === "typical") return `${read}, a typical serving — change it if you had more`
  return item.portion ? `${read}, from ${item.portion.amount} × ${item.portion.unit}` : read
}

/** The nine more nutrients as the page labels and writes them. */
const MORE: ReadonlyArray<readonly [string, string, string, number]> = [
  ["fiber_g", "Fiber", "g", 1],
  ["sugars_g", "Sugars", "g", 1],
  ["saturated_fat_g", "Saturated fat", "g", 1],
  ["sodium_mg", "Sodium", "mg", 0],
  ["cholesterol_mg", "Cholesterol", "mg", 0],
  ["potassium_mg", "Potassium", "mg", 0],
  ["calcium_mg", "Calcium", "mg", 0],
  ["iron_mg", "Iron", "mg", 1],
  ["vitamin_c_mg", "Vitamin C", "mg", 1]
]

/** Each item row's cells as the person reads them. */
const rows = (page: Page) =>
  page.evaluate<ReadonlyArray<ReadonlyArray<string>>>(`Array.from(document.querySelectorAll("#rows tr"), (tr) => Array.from(tr.querySelectorAll("td"), (td) => td.innerText.trim()))`)

/** The total row: its label, grams, kcal, protein, carbs and fat. */
const totals = (page: Page) =>
  page.evaluate<ReadonlyArray<string>>(`Array.from(document.querySelectorAll("#totals th, #totals td"), (c) => c.innerText.trim()).slice(0, 6)`)

/** Whether anything reaches past the right edge, and which of the result's parts lie outside the screen. */
const fits = (page: Page) =>
  page.evaluate<{ readonly sideways: boolean; readonly outside: ReadonlyArray<string> }>(`({
    sideways: document.documentElement.scrollWidth > document.documentElement.clientWidth,
    outside: Array.from(document.querySelectorAll("#rows td, #totals th, #totals td, #editor, #incomplete li, #more dd, #more li"))
      .filter((el) => el.offsetParent !== null && el.innerText.trim() !== "")
      .filter((el) => { const box = el.getBoundingClientRect(); return box.left < 0 || box.right > document.documentElement.clientWidth })
      .map((el) => el.innerText.trim().slice(0, 40))
  })`)

describe.skipIf(!existsSync(CHROMIUM))("a meal in words and a photo's more nutrients, in a browser", () => {
  let browser: Browser
  let url = ""
  let stop = async () => {}

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true })
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"]
    })
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

  /** What the service answers any client for this body of POST /v1/nutrition. */
  const nutrition = async (body: object): Promise<Answer> => {
    const answer = await fetch(`${url}/v1/nutrition`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    expect(answer.status).toBe(200)
    return (await answer.json()) as Answer
  }

  /** A page whose POST /v1/nutrition bodies are recorded with the authorization they carried. */
  const newPage = async (viewport: { width: number; height: number }) => {
    const page = await browser.newPage({ viewport })
    const sent: Array<{ body: unknown; authorization: string | undefined }> = []
    page.on("request", (request) => {
      if (new URL(request.url()).pathname === "/v1/nutrition") sent.push({ body: request.postDataJSON(), authorization: request.headers()["authorization"] })
    })
    return { page, sent }
  }

  const MEAL = "For lunch I had 2 large eggs, 150 g rice, milk and a zorblax pie"

  for (const [name, viewport] of [["phone", PHONE], ["desktop", DESKTOP]] as const) {
    it(`${name} (${viewport.width}×${viewport.height}): a sentence is read by the service; each food shows what was read, the one it could not read sits beside the incomplete totals; one food's words fixed keeps the others`, async () => {
      const { page, sent } = await newPage(viewport)
      try {
        await page.goto(`${url}/`)
        await poll(() => page.locator("#sandbox-banner").isVisible()).toBe(true)
        expect(await page.locator("#words").getAttribute("placeholder")).toBe("2 eggs, a slice of toast with butter and a latte")
        await page.locator("#words").fill(MEAL)
        await page.getByRole("button", { name: "Count this meal" }).click()

        const expected = await nutrition({ text: MEAL })
        expect(expected.items.map((i) => [i.text, i.grams_basis])).toEqual([
          ["2 large eggs", "portion"],
          ["150 g rice", "stated"],
          ["milk", "typical"]
        ])
        expect(expected.unmatched.map((u) => [u.index, u.text])).toEqual([[3, "a zorblax pie"]])
        const suggestions = expected.unmatched[0]!.suggestions

        await poll(async () => (await rows(page)).length).toBe(4)
        // The page sent the words as they stand, once, without the credit key: no reading of its own.
        expect(sent).toEqual([{ body: { text: MEAL }, authorization: undefined }])
        expect(await page.locator("#dish").textContent()).toBe("Your meal, in words")
        const seen = await rows(page)
        expect(seen.slice(0, 3).map((r) => r.slice(0, 7))).toEqual(
          expected.items.map((i) => [`${i.query}\n${readLine(i)}`, one(i.grams), ...figures(i.nutrition), `USDA\n${i.matched_name}`])
        )
        expect(readLine(expected.items[0]!)).toMatch(/^2 large eggs → [\d.]+ g, from 2 × large$/)
        expect(readLine(expected.items[1]!)).toBe("150 g rice → 150 g")
        expect(seen[3]![0]).toBe(`${expected.unmatched[0]!.query}\n“a zorblax pie”`)
        expect(seen[3]![2]).toContain("Not read, so not counted in the totals")
        expect(await totals(page)).toEqual(["Total, incomplete", one(expected.total_grams), ...figures(expected.totals)])
        expect(await page.locator("#incomplete > p").textContent()).toBe("The totals are incomplete: 1 food was not read and is not counted.")
        expect(await page.locator("#incomplete .missing > li > strong").allTextContents()).toEqual(["“a zorblax pie”"])
        expect(await page.locator("#incomplete .choices button").allTextContents()).toEqual(suggestions.map((s) => s.name))
        // A meal in words carries all thirteen nutrients: the more nutrients are its items' own.
        await page.locator("#more summary").click()
        expect(await page.locator("#more dd").allTextContents()).toEqual(MORE.map(([key, , unit, digits]) => `${fixed(expected.totals[key] ?? 0, digits)} ${unit}`))
        expect(await fits(page)).toEqual({ sideways: false, outside: [] })
        await page.screenshot({ path: join(artifacts, `web-page-words-${name}.png`), fullPage: true })
        if (name === "phone") {
          await page.setViewportSize({ width: 360, height: 780 })
          expect(await fits(page)).toEqual({ sideways: false, outside: [] })
          await page.setViewportSize(viewport)
        }

        // The eggs' grams typed: a correction of one food.
        const eggs = expected.items[0]!
        await page.getByRole("button", { name: `Correct ${eggs.query}` }).click()
        expect(await page.locator("#edit-words").inputValue()).toBe("2 large eggs")
        await page.locator("#edit-grams").fill("120")
        await poll(async () => (await rows(page))[0]![1]).toBe("120.0")
        await page.getByRole("button", { name: "Done" }).click()

        // The food it could not read, fixed in words: only those words are sent, and only that food changes.
        await page.getByRole("button", { name: `Correct ${expected.unmatched[0]!.query}` }).click()
        expect(await page.locator("#edit-words").inputValue()).toBe("a zorblax pie")
        await page.locator("#edit-words").fill("a slice of apple pie")
        await page.getByRole("button", { name: "Read again" }).click()
        await poll(() => page.locator("#edit-status").textContent()).toBe("Read again: “a slice of apple pie”.")
        const pie = (await nutrition({ text: "a slice of apple pie" })).items[0]!
        expect(sent.at(-1)).toEqual({ body: { text: "a slice of apple pie" }, authorization: undefined })
        const eggs120 = (await nutrition({ items: [{ fdc_id: eggs.fdc_id, grams: 120 }] })).items[0]!
        const after = await rows(page)
        expect(after.map((r) => r[0])).toEqual([
          `${eggs.query} corrected\n2 large eggs → 120 g, as you set it`,
          `${expected.items[1]!.query}\n${readLine(expected.items[1]!)}`,
          `${expected.items[2]!.query}\n${readLine(expected.items[2]!)}`,
          `${pie.query} corrected\n${readLine(pie)}`
        ])
        expect(after[0]!.slice(1, 6)).toEqual(["120.0", ...figures(eggs120.nutrition)])
        expect(after[3]!.slice(1, 6)).toEqual([one(pie.grams), ...figures(pie.nutrition)])
        const counted = [eggs120, expected.items[1]!, expected.items[2]!, pie]
        const sum = (key: "kcal" | "protein_g" | "carbs_g" | "fat_g") => tenth(counted.reduce((s, i) => s + i.nutrition[key], 0))
        await poll(() => totals(page)).toEqual([
          "Total",
          one(counted.reduce((s, i) => s + i.grams, 0)),
          ...figures({ kcal: sum("kcal"), protein_g: sum("protein_g"), carbs_g: sum("carbs_g"), fat_g: sum("fat_g") })
        ])
        expect(await page.locator("#incomplete").isVisible()).toBe(false)
        expect(await fits(page)).toEqual({ sideways: false, outside: [] })
      } finally {
        await page.close()
      }
    }, 180_000)

    it(`${name} (${viewport.width}×${viewport.height}): a photo's result shows the nine more nutrients of its USDA items, asked for free; a component the model estimated is left out of them`, async () => {
      const { page, sent } = await newPage(viewport)
      try {
        const usda = await nutrition({ items: [{ query: "rice, white, cooked", grams: 150 }, { query: "broccoli, cooked", grams: 85 }] })
        const shawarma = { kcal: 215.5, protein_g: 18.3, carbs_g: 4.7, fat_g: 13.9 }
        const four = (n: Nutrition) => ({ kcal: n.kcal, protein_g: n.protein_g, carbs_g: n.carbs_g, fat_g: n.fat_g })
        const result = {
          request_id: "req_more_1",
          dish_name: "Shawarma plate",
          items: [
            { name: "Chicken shawarma", query: "chicken shawarma", estimated_grams: 200, model_confidence: 0.7, nutrition_source: "ai", fdc_id: null, matched_name: null, per_100g: shawarma, nutrition: { kcal: 431, protein_g: 36.6, carbs_g: 9.4, fat_g: 27.8 } },
            ...usda.items.map((i, n) => ({ name: ["Rice", "Broccoli"][n], query: i.query, estimated_grams: i.grams, model_confidence: 0.8, nutrition_source: "usda", fdc_id: i.fdc_id, matched_name: i.matched_name, per_100g: four(i.nutrition), nutrition: four(i.nutrition) }))
          ],
          totals: { kcal: 700, protein_g: 45, carbs_g: 60, fat_g: 30 },
          estimated_total_grams: 435,
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
        await poll(() => page.locator("#more").isVisible()).toBe(true)

        // One free call for the USDA items at their grams, without the key.
        expect(sent).toEqual([{ body: { items: usda.items.map((i) => ({ fdc_id: i.fdc_id, grams: i.grams })) }, authorization: undefined }])
        expect(await page.locator("#more").getAttribute("open")).toBeNull()
        await page.locator("#more summary").click()
        expect(await page.locator("#more-note").textContent()).toBe("Totals of the 2 of 3 foods whose USDA record is known; the others are not in them.")
        expect(await page.locator("#more dt").allTextContents()).toEqual(MORE.map(([, label]) => label))
        expect(await page.locator("#more dd").allTextContents()).toEqual(
          MORE.map(([key, , unit, digits]) => `${usda.totals[key] === null ? "at least " : ""}${fixed(usda.items.reduce((s, i) => s + (i.nutrition[key] ?? 0), 0), digits)} ${unit}`)
        )
        const perItem = await page.locator("#more-items li").allInnerTexts()
        expect(perItem.length).toBe(2)
        expect(perItem[0]).toBe(
          `Rice, ${usda.items[0]!.grams} g: ${MORE.map(([key, label, unit, digits]) => `${label} ${usda.items[0]!.nutrition[key] === null ? "not known" : `${fixed(usda.items[0]!.nutrition[key] ?? 0, digits)} ${unit}`}`).join(" · ")}`
        )
        // The table keeps the analysis's own figures.
        expect((await rows(page)).map((r) => r[0])).toEqual(["Chicken shawarma", "Rice", "Broccoli"])
        expect(await totals(page)).toEqual(["Total", "435.0", ...figures(result.totals as Nutrition)])
        expect(await fits(page)).toEqual({ sideways: false, outside: [] })
        await page.screenshot({ path: join(artifacts, `web-page-more-${name}.png`), fullPage: true })
      } finally {
        await page.close()
      }
    }, 120_000)
  }
})
