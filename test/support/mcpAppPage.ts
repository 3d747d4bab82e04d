/** The MCP App in a real browser: Chromium, the host page (mcpAppHost.js) at the server's origin, the App's frame and what it shows. */
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"
import { Effect } from "effect"
import { type Browser, chromium, type Frame, type Page } from "playwright-core"

export const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium"
export const hasChromium = existsSync(CHROMIUM)
if (!hasChromium) console.warn(`NOTICE: browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`)

export const VIEWPORTS = [
  { width: 1100, height: 1000 },
  { width: 390, height: 844 }
] as const

/** Chromium for the scope. */
export const launchChromium = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--no-first-run"] })),
  (browser) => Effect.promise(() => browser.close())
)

/** The host page: the bundled host script, served by the test at an address of the server's own origin. */
export const hostPage = async () => {
  const bundled = await build({
    entryPoints: [fileURLToPath(new URL("./mcpAppHost.js", import.meta.url))],
    bundle: true,
    format: "iife",
    platform: "browser",
    write: false,
    logLevel: "silent"
  })
  const script = bundled.outputFiles[0]!.text.replaceAll("</script", "<\\/script")
  return `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><style>body{margin:0}iframe{width:100%;border:0;min-height:400px}</style></head><body><script>${script}</script></body></html>`
}

export const appFrame = async (page: Page): Promise<Frame> => {
  const handle = await page.waitForSelector("#app")
  const frame = await handle.contentFrame()
  if (frame === null) throw new Error("the App has no frame")
  return frame
}

/** A page of the host at `url`, connected with the credit `key` ("" for none), and the App's frame in it. */
export const openHost = (browser: Browser, url: string, html: string, viewport: { width: number; height: number }, key: string) =>
  Effect.gen(function* () {
    const page = yield* Effect.promise(() => browser.newPage({ viewport }))
    yield* Effect.promise(() => page.route(`${url}/test-host`, (route) => route.fulfill({ contentType: "text/html", body: html })))
    yield* Effect.promise(() => page.goto(`${url}/test-host`))
    yield* Effect.promise(() => page.evaluate(`startHost(${JSON.stringify(key)})`))
    const frame = yield* Effect.promise(() => appFrame(page))
    return { page, frame }
  })

export const fmt = (n: number, digits: number) => n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })

export interface CardRow {
  readonly name: string
  readonly grams: string
  readonly kcal: string
  readonly protein: string
  readonly carbs: string
  readonly fat: string
}

/** The rows of the card as the user reads them (a card per item on a phone, a table row on a desktop); grams as typed in their field. */
export const cardRows = (frame: Frame): Promise<Array<CardRow>> =>
  frame.$$eval("#rows tr", (trs) =>
    trs.map((tr) => {
      const cells = [...tr.querySelectorAll("td")].map((td) => td.querySelector("input")?.value ?? td.textContent ?? "")
      return { name: cells[0] ?? "", grams: cells[1] ?? "", kcal: cells[2] ?? "", protein: cells[3] ?? "", carbs: cells[4] ?? "", fat: cells[5] ?? "" }
    })
  )

/** The totals row as the user reads it: its label, grams, kcal, protein, carbohydrate and fat. */
export const cardTotals = (frame: Frame): Promise<Array<string>> =>
  frame.$$eval("#totals th, #totals td", (cells) => cells.map((cell) => cell.textContent ?? "").slice(0, 6))

/** Cells of the items, totals and disclaimer with text that is not wholly on screen across (none should be). */
export const offScreen = (frame: Frame) =>
  frame.$$eval("#rows td, #totals th, #totals td, .disclaimer, #corrections button:not([hidden])", (nodes) =>
    nodes
      .map((node) => ({
        text: node.textContent ?? "",
        box: node.getBoundingClientRect(),
        width: node.ownerDocument.documentElement.clientWidth,
        shown: node.checkVisibility()
      }))
      .filter(({ text, box, width, shown }) => shown && text !== "" && (box.width === 0 || box.left < 0 || box.right > width))
      .map(({ text }) => text)
  )

/** How far the App is wider than its screen (0 or less: it fits). */
export const overflow = (frame: Frame) =>
  frame.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") as Promise<number>
