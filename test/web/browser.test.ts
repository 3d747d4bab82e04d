// The web page in a real browser (Debian's Chromium through playwright-core) against `morsel serve --sandbox`:
// a key generated in the page, credits bought through the sandbox checkout, a photo analysed, errors in words.
import { execFileSync } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import { existsSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeImage } from "../support/images.ts"
import { root, type Served, serveProcess } from "../support/process.ts"

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium"
const artifacts = join(root, "test/artifacts")

if (!existsSync(CHROMIUM)) console.warn(`NOTICE: browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`)

interface Item {
  readonly name: string
  readonly estimated_grams: number
  readonly nutrition: { readonly kcal: number }
  readonly nutrition_source: string
  readonly matched_name: string | null
}
interface Result {
  readonly dish_name: string
  readonly items: ReadonlyArray<Item>
  readonly totals: { readonly kcal: number }
}

describe.skipIf(!existsSync(CHROMIUM))("the web page in a browser, against the sandbox", () => {
  let sandbox: Served
  let browser: Browser
  let page: Page
  const photoPath = join(artifacts, "meal.jpg")
  let photo: Awaited<ReturnType<typeof makeImage>>

  beforeAll(async () => {
    execFileSync(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root, stdio: "ignore" })
    mkdirSync(artifacts, { recursive: true })
    photo = await makeImage(1200, 900, "jpeg")
    writeFileSync(photoPath, photo.bytes)
    sandbox = await serveProcess(["--sandbox"])
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"]
    })
    page = await browser.newPage({ viewport: { width: 1100, height: 1300 } })
  }, 240_000)

  afterAll(async () => {
    await browser?.close()
    await sandbox?.stop()
  })

  /** What the API itself answers for the same photo, with a key of its own bought through the sandbox. */
  const expectedResult = async (): Promise<Result> => {
    const key = `morsel_test_${randomBytes(32).toString("hex")}`
    const auth = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const checkout = (await (
      await fetch(`${sandbox.url}/v1/credits/checkout`, { method: "POST", headers: auth, body: JSON.stringify({ order_id: randomUUID() }) })
    ).json()) as { session_id: string }
    await fetch(`${sandbox.url}/sandbox/checkout/${checkout.session_id}/pay`, { method: "POST", headers: { "content-type": "application/json" } })
    const answer = await fetch(`${sandbox.url}/v1/analyze`, {
      method: "POST",
      headers: { ...auth, "idempotency-key": `browser-${randomUUID()}` },
      body: JSON.stringify({ image_base64: photo.base64, mime_type: photo.mime })
    })
    expect(answer.status).toBe(200)
    return (await answer.json()) as Result
  }

  /** The page answers after the service does: wait for it, on a busy machine too. */
  const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 30_000, interval: 100 })

  const message = () => page.locator("#message").textContent()

  it("generate a key, buy credits through the sandbox checkout, analyse a photo, see the table and the balance drop by one", async () => {
    await page.goto(`${sandbox.url}/`)
    await poll(() => page.locator("#sandbox-banner").isVisible()).toBe(true)

    await page.getByRole("button", { name: "Generate a new key" }).click()
    const key = await page.locator("#key").inputValue()
    expect(key).toMatch(/^morsel_test_[0-9a-f]{64}$/)
    expect(await page.locator("#key-warning").textContent()).toContain("cannot be recovered")
    expect(await page.evaluate('localStorage.getItem("morsel.key")')).toBe(key)

    await page.getByRole("button", { name: "Buy 500 credits (USD 5.00)" }).first().click()
    await page.waitForURL(/\/sandbox\/checkout\/cs_test_/)
    await page.getByRole("button", { name: /Pay/ }).click()
    await page.waitForURL(`${sandbox.url}/`)
    await poll(() => page.locator("#return-panel").textContent()).toContain("your balance is 500 credits")
    await poll(() => page.locator("#key-status").textContent()).toBe("Balance: 500 credits.")

    await page.locator("input[type=file]").setInputFiles(photoPath)
    await poll(() => page.locator("#photo-status").textContent()).toContain("1200 × 900 px")
    await page.locator("button", { hasText: "Analy" }).click()
    await page.locator("table tbody tr").first().waitFor()

    const expected = await expectedResult()
    expect(await page.locator("#dish").textContent()).toBe(expected.dish_name)
    // A row's text is its cells separated by tabs; a USDA source cell holds the record's name on a line of its own.
    const rows = (await page.locator("table tbody tr").allInnerTexts()).map((row) => row.split("\t").map((cell) => cell.trim()))
    expect(rows.map((r) => r[0])).toEqual(expected.items.map((i) => i.name))
    expect(rows.map((r) => r[1])).toEqual(expected.items.map((i) => i.estimated_grams.toFixed(1)))
    expect(rows.map((r) => r[2])).toEqual(expected.items.map((i) => Math.round(i.nutrition.kcal).toLocaleString("en-US")))
    expect(rows.map((r) => r[6])).toEqual(expected.items.map((i) => (i.nutrition_source === "usda" ? `USDA\n${i.matched_name}` : "AI estimate")))
    expect(expected.items.some((i) => i.nutrition_source === "usda")).toBe(true)
    const totals = await page.locator("table tfoot tr").textContent()
    expect(totals).toContain(Math.round(expected.totals.kcal).toLocaleString("en-US"))
    expect(await page.locator("#chart-caption").textContent()).toMatch(/Protein \d+ % of energy/)
    await poll(() => page.locator("#key-status").textContent()).toBe("Balance: 499 credits.")
    await page.screenshot({ path: join(artifacts, "web-page.png"), fullPage: true })
  }, 180_000)

  it("a forced no-food outcome and a missing key are shown in words, and nothing is charged", async () => {
    await page.locator("#scenario").selectOption("no_food")
    await page.locator("button", { hasText: "Analy" }).click()
    await poll(message).toContain("No food was detected in this photo")
    expect(await message()).toContain("Nothing was charged")
    await page.getByRole("button", { name: "Refresh balance" }).click()
    await poll(() => page.locator("#key-status").textContent()).toBe("Balance: 499 credits.")

    await page.locator("#scenario").selectOption("")
    await page.locator("#key").fill("")
    await page.locator("button", { hasText: "Analy" }).click()
    await poll(message).toContain("Analyses are paid. Generate or paste a credit key, then buy credits.")
    expect(await page.locator("#message button", { hasText: "Buy 500 credits" }).count()).toBe(1)
    await page.screenshot({ path: join(artifacts, "web-page-402.png"), fullPage: true })

    // A photo over 2048 px a side is shrunk in the browser to fit the limits before it is sent.
    const large = join(artifacts, "large.png")
    writeFileSync(large, (await makeImage(2600, 1800, "png")).bytes)
    await page.locator("input[type=file]").setInputFiles(large)
    await poll(() => page.locator("#photo-status").textContent()).toContain("2600 × 1800 px")
    expect(await page.locator("#photo-status").textContent()).toMatch(/Shrunk to 0\.\d\d MB to fit the 2 MB limit\./)
  }, 120_000)

  it("the API reference at /docs, loaded on the first visit, shows the API's groups without a script error", async () => {
    const docs = await browser.newPage({ viewport: { width: 1100, height: 900 } })
    const errors: Array<string> = []
    docs.on("pageerror", (error) => errors.push(String(error)))
    try {
      await docs.goto(`${sandbox.url}/docs`)
      // Shown on the page, not only present in its inline script.
      await poll(() => docs.getByText("Powered by Scalar").first().isVisible()).toBe(true)
      for (const group of ["health", "analysis", "credits"]) expect(await docs.getByText(group, { exact: true }).first().isVisible()).toBe(true)
      expect(errors).toEqual([])
    } finally {
      await docs.close()
    }
  }, 60_000)
})
