// `morsel/client` as another project sees it once it ran `npm install <path to the clone>` (a link to it): a small
// TypeScript program that calls every method compiles with `tsc` against the package's declarations, and runs on
// Node from the package's build against the sandbox.
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RunningSandbox, startSandbox } from "../../src/testing.ts"
import { makeImage } from "../support/images.ts"
import { root } from "../support/process.ts"

const run = promisify(execFile)

const CONSUMER = `import { readFileSync } from "node:fs"
import { createClient, MorselError, type AnalysisResult, type Balance, type MorselClient } from "morsel/client"

const baseUrl = process.env["MORSEL_BASE_URL"] ?? "http://127.0.0.1:8787"
const key = "morsel_test_" + "ab".repeat(32)
const credits: MorselClient = createClient({ baseUrl, apiKey: key })
const wallet = createClient({ baseUrl, walletPrivateKey: "0x" + "11".repeat(32), scenario: "payment_pending", paymentPendingRetries: 0 })

const checkout = await credits.checkout({ context: { channel: "node_quickstart" } })
await fetch(baseUrl + "/sandbox/checkout/" + checkout.session_id + "/pay", { method: "POST" })
const confirmed: Balance = await credits.confirm(checkout.session_id ?? "")
const status = await credits.checkoutStatus(checkout.order_id)
const photo = readFileSync("meal.jpg")
const result: AnalysisResult = await credits.analyze(photo, { language: "lt", knownTotalGrams: 420, idempotencyKey: "consumer-0000000001" })
const fromPath = await credits.analyze("meal.jpg", { onPhoto: (p) => console.error(p.mime, p.bytes.length, p.change ?? "as it is") })
const fromBlob = await credits.analyze(new Blob([photo], { type: "image/jpeg" }))
const kcal: number = result.totals.kcal + result.items.reduce((sum, item) => sum + item.nutrition.kcal, 0)
const feedback = await credits.feedback({ requestId: result.request_id, category: "helpful", note: "" })
const balance = await credits.balance()
const health = await credits.health()
const prepared = await credits.preparePhoto(photo)
let pendingCode = ""
let resumed: AnalysisResult | undefined
try {
  await wallet.analyze(photo)
} catch (error) {
  if (!(error instanceof MorselError) || error.pending === undefined) throw error
  pendingCode = error.code + " " + error.status + " " + (error.requestId ?? "")
  resumed = await wallet.resume(error.pending)
}
/** The foods endpoints: their answers, or the code of the refusal. */
const tryFoods = async <A>(call: () => Promise<A>) => {
  try {
    return await call()
  } catch (error) {
    if (error instanceof MorselError) return { refused: error.code, status: error.status }
    throw error
  }
}
const search = await tryFoods(() => credits.searchFoods("tofu", { limit: 3 }))
const food = await tryFoods(() => credits.food("16126"))
const nutrition = await tryFoods(() =>
  credits.nutrition([{ query: "rice, white, cooked", grams: 150 }, { fdc_id: "01123", portion: { amount: 2, unit: "large" }, name: "eggs" }], { language: "en" })
)
// @ts-expect-error: a language the API does not speak
void (() => credits.analyze(photo, { language: "fr" }))
// @ts-expect-error: an item takes grams or a portion, not both
void (() => credits.nutrition([{ query: "egg", grams: 50, portion: { amount: 1, unit: "large" } }]))
console.log(JSON.stringify({
  confirmed: confirmed.credits_remaining, status: status.state, request: result.request_id, same: fromPath.request_id === fromBlob.request_id, // one input, one key: the second replays
  
  kcal: kcal > 0, feedback: feedback.recorded, balance: balance.credits_remaining, test_mode: health.test_mode, mime: prepared.mime,
  pendingCode, resumed: resumed?.request_id, receipt: resumed?.receipt?.success, search, food, nutrition: "refused" in nutrition ? nutrition : nutrition.complete
}))
`

describe("morsel/client in another project", () => {
  const project = mkdtempSync(join(tmpdir(), "morsel-consumer-"))
  let sandbox: RunningSandbox
  beforeAll(async () => {
    sandbox = await startSandbox()
  }, 120_000)
  afterAll(async () => {
    await sandbox?.close()
    rmSync(project, { recursive: true, force: true })
  })

  it("a program calling every method compiles with tsc (strict, NodeNext) and runs from the installed package", async () => {
    // The package as `npm ci` in the clone leaves it: built.
    await run(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root })
    mkdirSync(join(project, "node_modules/@types"), { recursive: true })
    symlinkSync(root, join(project, "node_modules/morsel"), "dir")
    symlinkSync(join(root, "node_modules/typescript"), join(project, "node_modules/typescript"), "dir")
    symlinkSync(join(root, "node_modules/@types/node"), join(project, "node_modules/@types/node"), "dir")
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }))
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noUncheckedIndexedAccess: true, types: ["node"], outDir: "out" },
        include: ["main.ts"]
      })
    )
    writeFileSync(join(project, "main.ts"), CONSUMER)
    writeFileSync(join(project, "meal.jpg"), (await makeImage(900, 700)).bytes)

    const compiled = await run(process.execPath, [join(project, "node_modules/typescript/bin/tsc"), "-p", "."], { cwd: project }).catch(
      (error: { stdout?: string }) => ({ stdout: `tsc failed:\n${error.stdout ?? ""}` })
    )
    expect(compiled.stdout).toBe("")

    const ran = await run(process.execPath, ["out/main.js"], { cwd: project, env: { PATH: process.env["PATH"] ?? "", MORSEL_BASE_URL: sandbox.url }, timeout: 120_000 })
    const summary = JSON.parse(ran.stdout)
    expect(summary).toMatchObject({
      confirmed: 500,
      status: "paid",
      same: true,
      kcal: true,
      feedback: true,
      balance: 498,
      test_mode: true,
      mime: "image/jpeg",
      pendingCode: expect.stringMatching(/^payment_pending 503 [0-9a-f-]{36}$/),
      receipt: true
    })
    expect(summary.resumed).toBe(summary.pendingCode.split(" ")[2])
    expect(ran.stderr).toContain("image/jpeg")
  }, 300_000)
})
