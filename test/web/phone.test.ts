// The web page on a phone (390×844, and 360 and 430 px wide) and on a desktop, in Debian's Chromium: no sideways
// scrolling, every figure of every item on screen, states that stay true, only the payment ways that are on, and
// the operator a cardholder can reach. The service runs in this process: the sandbox, and servers with payments off.
import { randomUUID } from "node:crypto"
import { existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { HttpServer } from "@effect/platform"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { type Browser, chromium, type Page } from "playwright-core"
import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { VisionModelScripted } from "../../src/analysis/VisionModelScripted.ts"
import { AppConfigFromEnv } from "../../src/config.ts"
import { ProcessorMemory } from "../../src/credits/ProcessorMemory.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { nodeServer } from "../../src/http/nodeServer.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { LoggingLive } from "../../src/logging.ts"
import { SandboxLive } from "../../src/sandbox/Sandbox.ts"
import { serveWith } from "../../src/server.ts"
import { ChainMemory } from "../../src/x402/ChainMemory.ts"
import { MemoryChainLive } from "../../src/x402/MemoryChain.ts"
import { TestDatabase } from "../support/database.ts"
import { freePort, root } from "../support/process.ts"

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium"
const artifacts = join(root, "test/artifacts")
const PHONE = { width: 390, height: 844 }
const DESKTOP = { width: 1280, height: 900 }
const OPERATOR = {
  OPERATOR_NAME: "Kitchen Lab",
  SUPPORT_CONTACT: "help@kitchen-lab.example",
  TERMS_URL: "https://kitchen-lab.example/terms",
  PRIVACY_URL: "https://kitchen-lab.example/privacy"
}

if (!existsSync(CHROMIUM)) console.warn(`NOTICE: phone browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`)

/** A running server of this process and how to stop it. */
interface Running {
  readonly url: string
  readonly stop: () => Promise<void>
}

const run = async (layer: Layer.Layer<HttpServer.HttpServer, unknown>, url?: string): Promise<Running> => {
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  const port = address._tag === "TcpAddress" ? address.port : 0
  return { url: url ?? `http://127.0.0.1:${port}`, stop: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** The sandbox on a known port (its checkout returns to PUBLIC_BASE_URL), with the operator's settings. */
const sandbox = async (): Promise<Running> => {
  const port = await freePort()
  const env = { HOST: "127.0.0.1", PORT: String(port), LOG_LEVEL: "error", ...OPERATOR }
  const logging = LoggingLive.pipe(Layer.provide(AppConfigFromEnv(env)))
  return run(SandboxLive(env, { banner: false, indexBuilt: true }).pipe(Layer.provide(logging)), `http://127.0.0.1:${port}`)
}

/** A production composition with card credits and x402 each on or off, and no operator settings. */
const configured = (ways: { readonly cards: boolean; readonly x402: boolean }) => {
  const config = AppConfigFromEnv({
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "error",
    ...(ways.x402 ? { X402_PAY_TO: "0x5a4db0c55a4db0c55a4db0c55a4db0c55a4db0c5" } : {})
  })
  return run(
    serveWith({
      vision: VisionModelScripted,
      foods: FoodDbEmpty,
      limits: LimitsUnlimited,
      database: TestDatabase,
      http: nodeServer({ host: "127.0.0.1", port: 0 }),
      ...(ways.cards ? { processor: ProcessorMemory } : {}),
      ...(ways.x402 ? { chain: ChainMemory.pipe(Layer.provide(MemoryChainLive)) } : {})
    }).pipe(Layer.provide(LoggingLive), Layer.provide(config))
  )
}

/** A phone photo: 4032 × 3024 of fine detail, several MB. */
const phonePhoto = () =>
  sharp({ create: { width: 4032, height: 3024, channels: 3, background: { r: 0, g: 0, b: 0 }, noise: { type: "gaussian", mean: 128, sigma: 40 } } })
    .jpeg({ quality: 92 })
    .toBuffer()

/** A small PNG, for requests the test sends itself. */
const pngBase64 = async () =>
  (await sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 190, g: 130, b: 60 } } }).png().toBuffer()).toString("base64")

/** A WebP "photo" of a plate of food, drawn: what a phone's gallery may hold. */
const webpPhoto = () =>
  sharp(
    Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="1600" height="1200">
      <rect width="1600" height="1200" fill="#8a5a36"/>
      <circle cx="800" cy="600" r="500" fill="#f4f1ea"/><circle cx="800" cy="600" r="400" fill="#ffffff"/>
      <ellipse cx="640" cy="520" rx="190" ry="120" fill="#c98a4b"/>
      <ellipse cx="930" cy="520" rx="170" ry="150" fill="#f6f0dc"/>
      <circle cx="760" cy="780" r="70" fill="#3f8f3a"/><circle cx="860" cy="800" r="60" fill="#4ea046"/>
      <circle cx="690" cy="790" r="55" fill="#367f32"/>
    </svg>`)
  )
    .webp({ quality: 85 })
    .toBuffer()

// What the browser measures is computed in the page (this project's TypeScript has no DOM types): a few expressions.

/** Nothing reaches past the right edge: the document is no wider than the viewport. */
const overflow = (page: Page) =>
  page.evaluate<{ readonly scroll: number; readonly viewport: number }>(
    "({ scroll: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth })"
  )

/** Each item's (and the total's) name, grams, kcal, protein, carbs and fat: its text and whether its box lies within the screen's width. */
const itemCells = (page: Page) =>
  page.evaluate<ReadonlyArray<ReadonlyArray<{ readonly text: string; readonly within: boolean }>>>(`
    Array.from(document.querySelectorAll("table.items tbody tr, table.items tfoot tr"), (row) =>
      Array.from(row.querySelectorAll("td, th")).slice(0, 6).map((cell) => {
        const box = cell.getBoundingClientRect()
        return { text: cell.innerText.trim(), within: box.width > 0 && box.left >= 0 && box.right <= document.documentElement.clientWidth }
      })
    )`)

/** Buttons, fields and menus on screen that are less than 44 px high or wide. */
const smallTargets = (page: Page) =>
  page.evaluate<ReadonlyArray<string>>(`
    Array.from(document.querySelectorAll("button, input, select"))
      .filter((el) => el.offsetParent !== null)
      .filter((el) => { const box = el.getBoundingClientRect(); return box.height < 44 || box.width < 44 })
      .map((el) => el.id || el.textContent)`)

/** The text a person sees (hidden parts left out). */
const visibleText = (page: Page) => page.evaluate<string>("document.body.innerText")

describe.skipIf(!existsSync(CHROMIUM))("the web page on a phone and a desktop", () => {
  let browser: Browser

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true })
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"]
    })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
  })

  const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 30_000, interval: 100 })

  describe("against the sandbox", () => {
    let served: Running
    beforeAll(async () => {
      served = await sandbox()
    }, 120_000)
    afterAll(async () => {
      await served?.stop()
    })

    /** A fresh page with a key bought through the page and the sandbox checkout; returns the checkout's session id. */
    const withCredits = async (page: Page, checkoutShot?: string) => {
      await page.goto(`${served.url}/`)
      await poll(() => page.locator("#sandbox-banner").isVisible()).toBe(true)
      await page.getByRole("button", { name: "Generate a new key" }).click()
      await page.getByRole("button", { name: "Buy 500 credits (USD 5.00)" }).first().click()
      await page.waitForURL(/\/sandbox\/checkout\/cs_test_/)
      const session = new URL(page.url()).pathname.split("/").pop() ?? ""
      if (checkoutShot) await page.screenshot({ path: join(artifacts, checkoutShot), fullPage: true })
      await page.getByRole("button", { name: /Pay/ }).click()
      await page.waitForURL(`${served.url}/`)
      await poll(() => page.locator("#key-status").textContent()).toBe("Balance: 500 credits.")
      return session
    }

    for (const [name, viewport] of [["phone", PHONE], ["desktop", DESKTOP]] as const) {
      it(`${name} (${viewport.width}×${viewport.height}): a phone photo is shrunk, every figure of every item is on screen, nothing scrolls sideways`, async () => {
        const page = await browser.newPage({ viewport })
        try {
          await withCredits(page)
          expect(await page.locator("#return-panel").textContent()).toContain("your balance is 500 credits")
          expect(await page.locator("#return-panel").textContent()).toContain("Contact Kitchen Lab support at help@kitchen-lab.example.")

          const sent: Array<{ mime_type: string; image_base64: string; known_total_grams?: number }> = []
          page.on("request", (request) => {
            if (request.url().endsWith("/v1/analyze")) sent.push(JSON.parse(request.postData() ?? "{}"))
          })
          const photo = await phonePhoto()
          expect(photo.length).toBeGreaterThan(3_000_000)
          await page.locator("input[type=file]").setInputFiles({ name: "IMG_0001.jpg", mimeType: "image/jpeg", buffer: photo })
          await poll(() => page.locator("#photo-status").textContent()).toMatch(/^4032 × 3024 px, \d\.\d\d MB\. Shrunk to [01]\.\d\d MB/)
          await page.locator("#grams").fill("420")
          await page.locator("button", { hasText: "Analy" }).click()
          await page.locator("table.items tbody tr").first().waitFor()

          // What left the browser keeps the service's limits: a JPEG of at most 2 MB and 2048 px a side.
          const bytes = Buffer.from(sent[0]!.image_base64, "base64")
          const meta = await sharp(bytes).metadata()
          expect([sent[0]!.mime_type, meta.format, bytes.length <= 2_000_000, Math.max(meta.width ?? 0, meta.height ?? 0) <= 2048]).toEqual([
            "image/jpeg",
            "jpeg",
            true,
            true
          ])
          expect(sent[0]!.known_total_grams).toBe(420)

          // The purchase notice gave way to the balance that is true now.
          await poll(() => page.locator("#key-status").textContent()).toBe("Balance: 499 credits.")
          expect(await page.locator("#return-panel").isVisible()).toBe(false)

          await page.evaluate("window.scrollTo(0, 0)")
          const cells = await itemCells(page)
          expect(cells.length).toBeGreaterThan(0)
          for (const row of cells) {
            expect(row.map((c) => c.within)).toEqual([true, true, true, true, true, true])
            expect(row[0]!.text.length).toBeGreaterThan(0)
            // A figure is read whole, never broken over two lines.
            for (const figure of row.slice(1)) expect(figure.text).toMatch(/^[\d,]+(\.\d)?$/)
          }
          // Narrow screens get a card per item, wide ones the table.
          const display = await page.evaluate<string>('getComputedStyle(document.querySelector("table.items tbody tr")).display')
          expect(display).toBe(name === "phone" ? "grid" : "table-row")
          const size = await overflow(page)
          expect(size.scroll).toBeLessThanOrEqual(size.viewport)
          if (name === "phone") expect(await smallTargets(page)).toEqual([])

          // A different photo: the weighed total and the previous meal belong to the previous photo.
          await page.locator("input[type=file]").setInputFiles({ name: "dinner.webp", mimeType: "image/webp", buffer: await webpPhoto() })
          await poll(() => page.locator("#photo-status").textContent()).toMatch(/^1600 × 1200 px, .* Converted from WebP to JPEG, \d\.\d\d MB\.$/)
          expect(await page.locator("#grams").inputValue()).toBe("")
          expect(await page.locator("#result").isVisible()).toBe(false)
          await page.locator("button", { hasText: "Analy" }).click()
          await page.locator("table.items tbody tr").first().waitFor()
          expect([sent[1]!.mime_type, (await sharp(Buffer.from(sent[1]!.image_base64, "base64")).metadata()).format]).toEqual(["image/jpeg", "jpeg"])
          expect(sent[1]!.known_total_grams).toBeUndefined()
          await poll(() => page.locator("#key-status").textContent()).toBe("Balance: 498 credits.")
          await page.evaluate("window.scrollTo(0, 0)")
          expect((await itemCells(page)).flat().every((c) => c.within)).toBe(true)
          await page.screenshot({ path: join(artifacts, `web-page-${name}.png`), fullPage: true })

          // An error after a result takes the result off the page; nothing is charged and the balance says so.
          await page.locator("#scenario").selectOption("no_food")
          await page.locator("button", { hasText: "Analy" }).click()
          await poll(() => page.locator("#message").textContent()).toContain("No food was detected in this photo")
          expect(await page.locator("#result").isVisible()).toBe(false)
          expect(await page.locator("table.items tbody tr").count()).toBe(0)
          await poll(() => page.locator("#key-status").textContent()).toBe("Balance: 498 credits.")
          const after = await overflow(page)
          expect(after.scroll).toBeLessThanOrEqual(after.viewport)
        } finally {
          await page.close()
        }
      }, 180_000)
    }

    it("from 360 to 430 px wide nothing scrolls sideways, with a long key and a result on the page", async () => {
      const page = await browser.newPage({ viewport: { width: 360, height: 780 } })
      try {
        await withCredits(page, "sandbox-checkout-phone.png")
        await page.locator("#show-key").click()
        // A file that is no image is refused in words, and nothing is sent.
        await page.locator("input[type=file]").setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("lunch") })
        await poll(() => page.locator("#photo-status").textContent()).toBe(
          "This file is not a photo this browser can read. Choose a JPEG, PNG or WebP photo, or take a new one."
        )
        await page.locator("button", { hasText: "Analy" }).click()
        await poll(() => page.locator("#message").textContent()).toBe("Choose or take a photo of the meal first.")
        await page.locator("input[type=file]").setInputFiles({ name: "meal.webp", mimeType: "image/webp", buffer: await webpPhoto() })
        await poll(() => page.locator("#photo-status").textContent()).toContain("Converted from WebP")
        await page.locator("button", { hasText: "Analy" }).click()
        await page.locator("table.items tbody tr").first().waitFor()
        for (const width of [360, 375, 390, 412, 430]) {
          await page.setViewportSize({ width, height: 800 })
          const size = await overflow(page)
          expect([width, size.scroll <= size.viewport]).toEqual([width, true])
          expect((await itemCells(page)).flat().every((c) => c.within)).toBe(true)
        }
      } finally {
        await page.close()
      }
    }, 180_000)

    it("a paused key is told whom to contact, on the page, beside the balance and in the footer; the checkout looks like the page", async () => {
      const page = await browser.newPage({ viewport: PHONE })
      try {
        const session = await withCredits(page)
        // The checkout page carries the page's style sheet, icon and the operator's footer.
        const checkout = await (await fetch(`${served.url}/sandbox/checkout/${session}`)).text()
        expect(checkout).toContain('<link rel="stylesheet" href="/app.css">')
        expect(checkout).toContain('<link rel="icon" href="/favicon.svg"')
        expect(checkout).toContain('Support: <a href="mailto:help@kitchen-lab.example">help@kitchen-lab.example</a>')

        const refund = await fetch(`${served.url}/sandbox/checkout/${session}/refund`, { method: "POST" })
        expect(refund.status).toBe(200)
        await page.getByRole("button", { name: "Refresh balance" }).click()
        await poll(() => page.locator("#key-status").textContent()).toContain("key paused pending support review")
        expect(await page.locator("#key-status").textContent()).toContain("Contact Kitchen Lab support at help@kitchen-lab.example.")

        await page.locator("input[type=file]").setInputFiles({ name: "meal.webp", mimeType: "image/webp", buffer: await webpPhoto() })
        await poll(() => page.locator("#photo-status").textContent()).toContain("Converted from WebP")
        await page.locator("button", { hasText: "Analy" }).click()
        await poll(() => page.locator("#message").textContent()).toContain("This key is paused after a refund or dispute")
        const message = page.locator("#message")
        expect(await message.textContent()).toContain("Contact Kitchen Lab support at help@kitchen-lab.example.")
        expect(await message.locator("a").getAttribute("href")).toBe("mailto:help@kitchen-lab.example")
        const box = await message.boundingBox()
        expect(box !== null && box.x >= 0 && box.x + box.width <= PHONE.width).toBe(true)

        const footer = page.locator("#operator")
        expect(await footer.textContent()).toBe("Run by Kitchen Lab · Support: help@kitchen-lab.example · Terms and refunds · Privacy")
        expect(await page.evaluate<ReadonlyArray<string>>('Array.from(document.querySelectorAll("#operator a"), (a) => a.getAttribute("href"))')).toEqual([
          "mailto:help@kitchen-lab.example",
          "https://kitchen-lab.example/terms",
          "https://kitchen-lab.example/privacy"
        ])
        await page.screenshot({ path: join(artifacts, "web-page-paused-phone.png"), fullPage: true })

        // The API says the same to any other client.
        const api = await fetch(`${served.url}/v1/analyze`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${await page.locator("#key").inputValue()}`,
            "content-type": "application/json",
            "idempotency-key": `paused-${randomUUID()}`
          },
          body: JSON.stringify({ image_base64: await pngBase64(), mime_type: "image/png" })
        })
        const body = (await api.json()) as { error: { code: string; message: string } }
        expect([api.status, body.error.code]).toEqual([402, "key_paused"])
        expect(body.error.message).toContain("Contact Kitchen Lab support at help@kitchen-lab.example.")
      } finally {
        await page.close()
      }
    }, 180_000)

    it("the icon is the service's own, under both names browsers ask for", async () => {
      for (const path of ["/favicon.svg", "/favicon.ico"]) {
        const answer = await fetch(`${served.url}${path}`)
        expect([path, answer.status, answer.headers.get("content-type")]).toEqual([path, 200, "image/svg+xml"])
        expect(await answer.text()).toContain("<svg")
      }
    })
  })

  describe("payment ways switched off", () => {
    /** The page's text once it has read /health, and what the API itself answers a caller without a key. */
    const look = async (server: Running, viewport: { width: number; height: number }) => {
      const page = await browser.newPage({ viewport })
      await page.goto(`${server.url}/`)
      await poll(() => page.locator("#operator").textContent()).not.toBe("")
      const anonymous = (await (
        await fetch(`${server.url}/v1/analyze`, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": `anonymous-${randomUUID()}` },
          body: JSON.stringify({ image_base64: await pngBase64(), mime_type: "image/png" })
        })
      ).json()) as { error: { code: string; message: string } }
      const checkout = (await (
        await fetch(`${server.url}/v1/credits/checkout`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer morsel_live_${"a".repeat(64)}` },
          body: JSON.stringify({ order_id: randomUUID() })
        })
      ).json()) as { error?: { code: string; message: string } }
      return { page, anonymous: anonymous.error, checkout: checkout.error }
    }

    it("neither card credits nor x402: the page says so plainly, offers no purchase and no analysis", async () => {
      const server = await configured({ cards: false, x402: false })
      try {
        for (const viewport of [PHONE, DESKTOP]) {
          const { page, anonymous, checkout } = await look(server, viewport)
          const text = await visibleText(page)
          expect(text).toContain("This server takes no payments yet, so no analysis can be run.")
          expect(text).not.toMatch(/Buy|credit key|x402|pay per call/i)
          expect(await page.locator("#key-panel").isVisible()).toBe(false)
          expect(await page.locator("button", { hasText: "Analy" }).isDisabled()).toBe(true)
          expect(await page.locator("#operator").textContent()).toBe("This server's operator has not published a name or a support contact.")
          const size = await overflow(page)
          expect(size.scroll).toBeLessThanOrEqual(size.viewport)
          if (viewport === PHONE) await page.screenshot({ path: join(artifacts, "web-page-no-payments-phone.png"), fullPage: true })
          await page.close()
          // The API's own words point nowhere that is off.
          expect(anonymous?.code).toBe("x402_unavailable")
          expect(anonymous?.message).toContain("This server takes no payments yet: its operator has set neither X402_PAY_TO")
          expect(anonymous?.message).not.toContain("credit key")
          expect(checkout?.code).toBe("payments_unavailable")
          expect(checkout?.message).not.toContain("x402 instead")
        }
      } finally {
        await server.stop()
      }
    }, 180_000)

    it("x402 on, card credits off: no key or purchase is offered, and the page says how this server is paid", async () => {
      const server = await configured({ cards: false, x402: true })
      try {
        const { page, anonymous, checkout } = await look(server, PHONE)
        const text = await visibleText(page)
        expect(text).toContain("This server does not sell card credits, so this page cannot pay for an analysis.")
        expect(text).not.toMatch(/Buy|Generate a new key|credit key/)
        expect(await page.locator("#key-panel").isVisible()).toBe(false)
        expect(await page.locator("button", { hasText: "Analy" }).isDisabled()).toBe(true)
        expect(await page.locator("#payments-off a").getAttribute("href")).toBe("/docs")
        await page.close()
        expect(anonymous?.code).toBe("payment_required")
        expect(checkout?.code).toBe("payments_unavailable")
        expect(checkout?.message).toBe("Card credits are not sold on this server (its operator has not set STRIPE_SECRET_KEY); pay per call with x402 instead.")
      } finally {
        await server.stop()
      }
    }, 180_000)

    it("card credits on, x402 off: keys and purchases are offered and x402 is never mentioned", async () => {
      const server = await configured({ cards: true, x402: false })
      try {
        const { page, anonymous } = await look(server, PHONE)
        expect(await page.locator("#key-panel").isVisible()).toBe(true)
        expect(await page.getByRole("button", { name: "Buy 500 credits (USD 5.00)" }).isVisible()).toBe(true)
        expect(await page.locator("#payments-off").isVisible()).toBe(false)
        await page.locator("input[type=file]").setInputFiles({ name: "meal.webp", mimeType: "image/webp", buffer: await webpPhoto() })
        await poll(() => page.locator("#photo-status").textContent()).toContain("Converted from WebP")
        await page.locator("button", { hasText: "Analy" }).click()
        await poll(() => page.locator("#message").textContent()).toBe(
          "Analyses are paid. Generate or paste a credit key, then buy credits.Buy 500 credits (USD 5.00)"
        )
        expect(await visibleText(page)).not.toMatch(/x402|pay per call/i)
        await page.close()
        expect(anonymous?.code).toBe("x402_unavailable")
        expect(anonymous?.message).toBe("Per-call x402 payments are not enabled on this server; use a prepaid credit key (Authorization: Bearer).")
      } finally {
        await server.stop()
      }
    }, 180_000)
  })
})

