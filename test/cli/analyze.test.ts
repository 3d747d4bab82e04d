// `morsel analyze` as a person runs it against the sandbox: any phone photo is made to fit the API before it is sent,
// failures are one line (or JSON under --json), and a payment_pending answer is resumed with one short command.
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { crc32, deflateSync } from "node:zlib"
import { decodePaymentSignatureHeader, encodePaymentRequiredHeader } from "@x402/core/http"
import type { PaymentRequirements } from "@x402/core/types"
import sharp from "sharp"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { IMAGE_LIMITS } from "../../src/domain/image.ts"
import { type RunningSandbox, startSandbox } from "../../src/testing.ts"
import { freePort, root } from "../support/process.ts"

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** `morsel …args` from the sources, with only PATH, a state folder and the given variables in its environment. */
const morsel = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<Run>((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", join(root, "src/cli.ts"), ...args],
      { cwd: root, env: { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp", MORSEL_STATE_DIR: state, ...env }, timeout: 120_000, maxBuffer: 16_000_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
    )
  })

/** Pixels that do not compress away, as a camera's do: a photo of the size phones take weighs megabytes. */
const noise = (width: number, height: number) => sharp(randomBytes(width * height * 3), { raw: { width, height, channels: 3 } })

/** A PNG file of `width`×`height` by its header, with almost no pixel data behind it. */
const pngClaiming = (width: number, height: number) => {
  const chunk = (type: string, data: Buffer) => {
    const typed = Buffer.concat([Buffer.from(type, "latin1"), data])
    const length = Buffer.alloc(4)
    length.writeUInt32BE(data.length)
    const crc = Buffer.alloc(4)
    crc.writeUInt32BE(crc32(typed))
    return Buffer.concat([length, typed, crc])
  }
  const header = Buffer.alloc(13)
  header.writeUInt32BE(width, 0)
  header.writeUInt32BE(height, 4)
  header[8] = 8 // bits per channel
  header[9] = 2 // RGB
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  return Buffer.concat([signature, chunk("IHDR", header), chunk("IDAT", deflateSync(Buffer.alloc(1000))), chunk("IEND", Buffer.alloc(0))])
}

let folder = ""
let state = ""
let sandbox: RunningSandbox
/** What reached the API: a pass-through in front of the sandbox records every paid analysis body (x402 sends each twice: unpaid, then paid). */
let proxy: Server
let proxyUrl = ""
const received: Array<{ image_base64: string; mime_type: string }> = []
let requestsSeen = 0
/** The bodies of POST /v1/nutrition that reached the proxy; `failNutrition` answers them 503 instead. */
const nutritionBodies: Array<unknown> = []
let failNutrition = false

const units = async (address: string) => {
  const wallet = (await (await fetch(`${sandbox.url}/sandbox/wallets/${address}`)).json()) as { units: string }
  return BigInt(wallet.units)
}

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "morsel-analyze-"))
  state = join(folder, "state")
  sandbox = await startSandbox()
  proxy = createServer(async (req, res) => {
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks)
    requestsSeen++
    if (req.url === "/v1/analyze" && req.headers["payment-signature"] !== undefined) received.push(JSON.parse(body.toString("utf8")))
    if (req.url === "/v1/nutrition") {
      nutritionBodies.push(JSON.parse(body.toString("utf8")))
      if (failNutrition) {
        res.writeHead(503, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { code: "unavailable", message: "down for the test" } }))
        return
      }
    }
    const headers = Object.fromEntries(Object.entries(req.headers).filter((entry): entry is [string, string] => typeof entry[1] === "string" && entry[0] !== "host"))
    const answer = await fetch(`${sandbox.url}${req.url}`, { method: req.method ?? "GET", headers, ...(body.length > 0 ? { body } : {}) })
    res.writeHead(answer.status, Object.fromEntries(answer.headers))
    res.end(Buffer.from(await answer.arrayBuffer()))
  })
  const port = await freePort()
  await new Promise<void>((resolve) => proxy.listen(port, "127.0.0.1", resolve))
  proxyUrl = `http://127.0.0.1:${port}`
}, 120_000)

afterAll(async () => {
  await new Promise((resolve) => proxy?.close(resolve))
  await sandbox?.close()
  rmSync(folder, { recursive: true, force: true })
})

describe("morsel analyze", () => {
  it("sends a 4032×3024 phone JPEG turned upright, a 3 MB PNG and a WebP as images the API takes, saying what it did", async () => {
    const phone = join(folder, "IMG_2041.jpg")
    // Stored sideways with EXIF orientation 6, as phones store a portrait photo.
    await noise(4032, 3024).jpeg({ quality: 92 }).withMetadata({ orientation: 6 }).toFile(phone)
    const png = join(folder, "screenshot.png")
    await noise(1100, 1000).png().toFile(png)
    const webp = join(folder, "lunch.webp")
    await noise(800, 600).webp().toFile(webp)

    const wallet = generatePrivateKey()
    const paying = ["--base-url", proxyUrl, "--wallet-key", ` ${wallet} `, "--json"]
    const runs = [await morsel(["analyze", phone, ...paying]), await morsel(["analyze", png, ...paying]), await morsel(["analyze", webp, ...paying])]

    for (const run of runs) {
      expect(run.code, run.stderr).toBe(0)
      expect(JSON.parse(run.stdout)).toMatchObject({ estimate: true, model: "sandbox" })
    }
    expect(runs[0]!.stderr).toMatch(/^IMG_2041\.jpg: 3024×4032 JPEG \d+\.\d MB → 1536×2048 JPEG \d\.\d MB, turned upright$/m)
    expect(runs[1]!.stderr).toMatch(/^screenshot\.png: 1100×1000 PNG 3\.\d MB → 1100×1000 JPEG \d\.\d MB$/m)
    expect(runs[2]!.stderr).toMatch(/^lunch\.webp: 800×600 WebP 0\.\d MB → 800×600 JPEG 0\.\d MB$/m)

    // What reached the API keeps its image rules: JPEG or PNG, 16 to 2048 px a side, at most 2 MB, upright.
    expect(received).toHaveLength(3)
    const sizes = []
    for (const body of received) {
      const bytes = Buffer.from(body.image_base64, "base64")
      const meta = await sharp(bytes).metadata()
      expect(body.mime_type).toBe(`image/${meta.format}`)
      expect(bytes.length).toBeLessThanOrEqual(IMAGE_LIMITS.maxBytes)
      expect(Math.max(meta.width, meta.height)).toBeLessThanOrEqual(2048)
      expect(meta.orientation ?? 1).toBe(1)
      sizes.push([meta.width, meta.height])
    }
    expect(sizes).toEqual([
      [1536, 2048],
      [1100, 1000],
      [800, 600]
    ])
    // Three results, three cents.
    expect(await units(privateKeyToAccount(wallet).address)).toBe(100_000_000n - 30_000n)
  }, 240_000)

  it("refuses a 60 MB file before reading it, a HEIC it cannot read and a decompression bomb, each in one line and sending nothing", async () => {
    const huge = join(folder, "huge.png")
    writeFileSync(huge, "")
    truncateSync(huge, 60_000_000) // sparse: reading it whole would take 60 MB of memory
    const heic = join(folder, "IMG_2042.HEIC")
    const header = Buffer.alloc(4096)
    header.writeUInt32BE(24, 0)
    header.write("ftypheic\0\0\0\0mif1heic", 4, "latin1")
    writeFileSync(heic, header)
    // A PNG whose header claims 20000×20000 pixels (a decompression bomb), in a few hundred bytes.
    const bomb = join(folder, "bomb.png")
    writeFileSync(bomb, pngClaiming(20_000, 20_000))
    const before = requestsSeen
    const wallet = ["--base-url", proxyUrl, "--wallet-key", generatePrivateKey()]
    const [tooLarge, unreadable, asJson, tooManyPixels] = [
      await morsel(["analyze", huge, ...wallet]),
      await morsel(["analyze", heic, ...wallet]),
      await morsel(["analyze", huge, ...wallet, "--json"]),
      await morsel(["analyze", bomb, ...wallet])
    ]

    expect([tooLarge.code, tooLarge.stdout, tooLarge.stderr]).toEqual([1, "", "morsel: huge.png is 60.0 MB, larger than any photo (at most 50.0 MB): choose the photo itself\n"])
    expect(unreadable.code).toBe(1)
    expect(unreadable.stderr).toBe(
      "morsel: IMG_2042.HEIC is a HEIC photo, which morsel cannot read: export it as JPEG (on an iPhone, Settings → Camera → Formats → Most Compatible)\n"
    )
    expect(asJson.code).toBe(1)
    expect(JSON.parse(asJson.stdout)).toEqual({
      error: { code: "photo_too_large", message: "huge.png is 60.0 MB, larger than any photo (at most 50.0 MB): choose the photo itself" }
    })
    expect(tooManyPixels.stderr).toBe("morsel: bomb.png is 20000×20000 pixels, more than any photo (at most 268 million pixels)\n")
    expect(requestsSeen).toBe(before)
  }, 120_000)

  it("--scenario reaches the sandbox; refusals are one line, or the server's JSON under --json; an unreachable server names the fix", async () => {
    const photo = join(folder, "plate.jpg")
    await noise(320, 240).jpeg().toFile(photo)
    const wallet = generatePrivateKey()
    const address = privateKeyToAccount(wallet).address
    const paying = ["--base-url", sandbox.url, "--wallet-key", wallet]
    const nowhere = `http://127.0.0.1:${await freePort()}`
    const [noFood, noFoodJson, unreachable] = [
      await morsel(["analyze", photo, ...paying, "--scenario", "no_food"]),
      await morsel(["analyze", photo, ...paying, "--scenario", "no_food", "--json"]),
      await morsel(["analyze", photo, "--wallet-key", wallet], { MORSEL_BASE_URL: nowhere })
    ]

    expect(noFood.code).toBe(1)
    expect(noFood.stdout).toBe("")
    expect(noFood.stderr.trimEnd().split("\n")).toHaveLength(1)
    expect(noFood.stderr).toMatch(/^morsel: HTTP 422 no_food_detected: /)
    expect(noFoodJson.code).toBe(1)
    expect(JSON.parse(noFoodJson.stdout)).toMatchObject({ status: 422, error: { code: "no_food_detected" } })
    expect(unreachable.code).toBe(1)
    expect(unreachable.stderr.trimEnd().split("\n")).toHaveLength(1)
    expect(unreachable.stderr).toContain(`cannot reach the morsel server at ${nowhere}`)
    expect(unreachable.stderr).toContain("start one with `morsel serve --sandbox`, or give --base-url or set MORSEL_BASE_URL")
    // Nothing was charged for any of them.
    expect(await units(address)).toBe(100_000_000n)
  }, 120_000)

  it("after the table, the nine more nutrients of the USDA items from the free nutrition path; its failure only leaves them out", async () => {
    const photo = join(folder, "dinner.jpg")
    await noise(320, 240).jpeg().toFile(photo)
    const wallet = generatePrivateKey()
    const paying = ["--base-url", proxyUrl, "--wallet-key", wallet]
    nutritionBodies.length = 0
    const run = await morsel(["analyze", photo, ...paying])
    expect(run.code, run.stderr).toBe(0)
    expect(nutritionBodies).toHaveLength(1)
    const asked = nutritionBodies[0] as { items: ReadonlyArray<{ fdc_id: string; grams: number }> }
    // What the service answers any client for the same records and grams: the figures printed.
    const answer = (await (await fetch(`${sandbox.url}/v1/nutrition`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(asked) })).json()) as {
      items: ReadonlyArray<{ nutrition: Record<string, number | null> }>
      totals: Record<string, number | null>
    }
    const keys = ["fiber_g", "sugars_g", "saturated_fat_g", "sodium_mg", "cholesterol_mg", "potassium_mg", "calcium_mg", "iron_mg", "vitamin_c_mg"]
    const digits = [1, 1, 1, 0, 0, 0, 0, 1, 1]
    const shown = (v: number | null | undefined, d: number) => (v === null || v === undefined ? "?" : v.toFixed(d))
    const lines = run.stdout.split("\n")
    const header = lines.findIndex((line) => line.startsWith("more nutrients"))
    expect(header, run.stdout).toBeGreaterThan(0)
    expect(lines[header]!.split(/\s{2,}/)).toEqual(["more nutrients", "fiber g", "sugars g", "sat. fat g", "sodium mg", "chol. mg", "potassium mg", "calcium mg", "iron mg", "vit. C mg"])
    const total = lines.slice(header).find((line) => line.startsWith("total"))!
    expect(total.split(/\s+/).slice(1)).toEqual(keys.map((k, i) => shown(answer.totals[k], digits[i]!)))
    expect(lines.slice(header + 2, header + 2 + asked.items.length).map((line) => line.trim().split(/\s{2,}/).slice(1))).toEqual(
      answer.items.map((item) => keys.map((k, i) => shown(item.nutrition[k], digits[i]!)))
    )
    expect(run.stdout).toMatch(/More nutrients: (every component has a USDA record|the \d+ of \d+ components with a USDA record); from the free nutrition path, nothing charged\.\n$/)

    // The free call fails: the analysis is printed all the same, without them, and the command succeeds.
    failNutrition = true
    try {
      const without = await morsel(["analyze", photo, ...paying])
      expect(without.code, without.stderr).toBe(0)
      expect(without.stdout).toContain("request ")
      expect(without.stdout).not.toContain("more nutrients")
      expect(nutritionBodies).toHaveLength(2)
    } finally {
      failNutrition = false
    }
    // --json prints the body only.
    const json = await morsel(["analyze", photo, ...paying, "--json"])
    expect(JSON.parse(json.stdout)).toMatchObject({ estimate: true })
    expect(nutritionBodies).toHaveLength(2)
  }, 180_000)

  it("payment_pending: one short line to resume; --resume sends the identical retry, which settles once", async () => {
    const photo = join(folder, "soup.jpg")
    await noise(640, 480).jpeg().toFile(photo)
    const wallet = generatePrivateKey()
    const address = privateKeyToAccount(wallet).address
    const pending = await morsel(["analyze", photo, "--base-url", sandbox.url, "--wallet-key", wallet, "--scenario", "payment_pending"])

    expect(pending.code).toBe(1)
    const line = pending.stderr.trimEnd()
    expect(line.split("\n")).toHaveLength(1)
    const requestId = /morsel analyze --resume ([0-9a-f-]{36})$/.exec(line)?.[1]
    expect(requestId, line).toBeDefined()
    expect(line.length).toBeLessThan(200)
    expect(await units(address)).toBe(100_000_000n)

    // The request_id as a person may copy it: in upper case. No wallet is needed: the signed payment is kept.
    const resumed = await morsel(["analyze", "--resume", requestId!.toUpperCase(), "--json"])
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(JSON.parse(resumed.stdout)).toMatchObject({ request_id: requestId })
    expect(await units(address)).toBe(100_000_000n - 10_000n)

    const again = await morsel(["analyze", "--resume", requestId!])
    expect(again.code).toBe(1)
    expect(again.stderr).toContain(`no pending analysis ${requestId} is kept`)
    expect(await units(address)).toBe(100_000_000n - 10_000n)
  }, 120_000)

  it("a server asking 1 USDC an analysis: one line naming the price and --max-price, nothing signed; --max-price 1 pays it", async () => {
    const photo = join(folder, "greedy.jpg")
    await noise(320, 240).jpeg().toFile(photo)
    const signed: Array<string> = []
    const greedy = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        const signature = req.headers["payment-signature"]
        if (typeof signature === "string") {
          signed.push(decodePaymentSignatureHeader(signature).accepted.amount)
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify({ request_id: crypto.randomUUID(), dish_name: "Rice", items: [], totals: { kcal: 0, protein_g: 0, carbs_g: 0, fat_g: 0 }, estimated_total_grams: 0, estimate: true, model: "greedy" }))
          return
        }
        const accepts: Array<PaymentRequirements> = [
          {
            scheme: "exact",
            network: "eip155:8453",
            asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
            amount: "1000000",
            payTo: privateKeyToAccount(generatePrivateKey()).address,
            maxTimeoutSeconds: 300,
            extra: { name: "USD Coin", version: "2" }
          }
        ]
        res.writeHead(402, { "content-type": "application/json", "payment-required": encodePaymentRequiredHeader({ x402Version: 2, resource: { url: "http://greedy/v1/analyze" }, accepts }) })
        res.end("{}")
      })
    })
    const port = await freePort()
    await new Promise<void>((resolve) => greedy.listen(port, "127.0.0.1", resolve))
    try {
      const paying = ["--base-url", `http://127.0.0.1:${port}`, "--wallet-key", generatePrivateKey()]
      const refused = await morsel(["analyze", photo, ...paying])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toBe(
        "morsel: the server asks 1 USDC per analysis; this client pays at most 0.01 USDC (exact, on Base): nothing was signed. If this server really charges more, allow it with --max-price 1\n"
      )
      expect(signed).toEqual([])
      const badCap = await morsel(["analyze", photo, ...paying, "--max-price", "lots"])
      expect(badCap.stderr).toContain("--max-price must be a price in USDC")
      const allowed = await morsel(["analyze", photo, ...paying, "--max-price", "1"])
      expect(allowed.code, allowed.stderr).toBe(0)
      expect(signed).toEqual(["1000000"])
    } finally {
      await new Promise((resolve) => greedy.close(resolve))
    }
  }, 120_000)

  it("a paid answer lost to a dropped connection: the same command run again replays the saved result and pays once", async () => {
    const photo = join(folder, "stew.jpg")
    await noise(400, 300).jpeg().toFile(photo)
    const wallet = generatePrivateKey()
    const address = privateKeyToAccount(wallet).address
    // In front of the sandbox: the first paid analysis reaches it and is answered there, then its connection drops.
    let dropped: { readonly status: number; readonly requestId: string } | undefined
    const dropping = createServer(async (req, res) => {
      const chunks: Array<Buffer> = []
      for await (const chunk of req) chunks.push(chunk as Buffer)
      const body = Buffer.concat(chunks)
      const headers = Object.fromEntries(Object.entries(req.headers).filter((entry): entry is [string, string] => typeof entry[1] === "string" && entry[0] !== "host"))
      const answer = await fetch(`${sandbox.url}${req.url}`, { method: req.method ?? "GET", headers, ...(body.length > 0 ? { body } : {}) })
      const text = await answer.text()
      if (dropped === undefined && req.url === "/v1/analyze" && req.headers["payment-signature"] !== undefined) {
        dropped = { status: answer.status, requestId: String((JSON.parse(text) as { request_id?: string }).request_id) }
        req.socket.destroy()
        return
      }
      res.writeHead(answer.status, Object.fromEntries(answer.headers))
      res.end(text)
    })
    const port = await freePort()
    await new Promise<void>((resolve) => dropping.listen(port, "127.0.0.1", resolve))
    try {
      const command = ["analyze", photo, "--base-url", `http://127.0.0.1:${port}`, "--wallet-key", wallet, "--json"]
      const lost = await morsel(command)
      expect(lost.code).toBe(1)
      expect(dropped?.status).toBe(200)
      // The server was paid for the lost answer.
      expect(await units(address)).toBe(100_000_000n - 10_000n)

      const again = await morsel(command)
      expect(again.code, again.stderr).toBe(0)
      expect(JSON.parse(again.stdout)).toMatchObject({ request_id: dropped?.requestId })
      expect(await units(address)).toBe(100_000_000n - 10_000n)
    } finally {
      await new Promise((resolve) => dropping.close(resolve))
    }
  }, 180_000)

  it("a saved result expired (410): the run steps to the next key of its chain, and a rerun walks the same chain", async () => {
    const photo = join(folder, "toast.jpg")
    await noise(200, 150).jpeg().toFile(photo)
    // A server whose first key's result has expired: 410 for it, a result for any other key.
    const keys: Array<string> = []
    const expiring = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        const key = String(req.headers["idempotency-key"])
        keys.push(key)
        const expired = key === keys[0]
        res.writeHead(expired ? 410 : 200, { "content-type": "application/json" })
        res.end(JSON.stringify(expired ? { error: { code: "result_expired", message: "the 24-hour result recovery window has passed" } } : { request_id: `result-of-${key}`, items: [], totals: { kcal: 0, protein_g: 0, carbs_g: 0, fat_g: 0 } }))
      })
    })
    const port = await freePort()
    await new Promise<void>((resolve) => expiring.listen(port, "127.0.0.1", resolve))
    try {
      const command = ["analyze", photo, "--base-url", `http://127.0.0.1:${port}`, "--key", `morsel_test_${"ab".repeat(32)}`, "--json"]
      const first = await morsel(command)
      const second = await morsel(command)
      expect(first.code, first.stderr).toBe(0)
      expect(second.stdout).toBe(first.stdout)
      expect(keys).toHaveLength(4)
      expect(keys[0]).not.toBe(keys[1])
      expect(keys.slice(2)).toEqual(keys.slice(0, 2))
      expect(JSON.parse(first.stdout)).toMatchObject({ request_id: `result-of-${keys[1]}` })
    } finally {
      await new Promise((resolve) => expiring.close(resolve))
    }
  }, 180_000)
})
