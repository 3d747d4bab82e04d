// `morsel/client` against the sandbox: any photo analysed with a credit key and with a wallet, payment_pending
// resumed with the same signed authorization and one debit, an in-flight duplicate waited out, errors typed.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Scope } from "effect"
import sharp from "sharp"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createClient, MorselError, type MorselClient, type PreparedPhoto } from "../../src/client/index.ts"
import { type RunningSandbox, startSandbox } from "../../src/testing.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { chickenRice } from "../support/meals.ts"

/** Pixels that do not compress away, as a camera's do. */
const noise = (width: number, height: number) => sharp(randomBytes(width * height * 3), { raw: { width, height, channels: 3 } })

let folder = ""
let sandbox: RunningSandbox
let phonePath = ""
let png: Buffer
let webp: Buffer

const units = async (address: string) => {
  const wallet = (await (await fetch(`${sandbox.url}/sandbox/wallets/${address}`)).json()) as { units: string }
  return BigInt(wallet.units)
}

/** A fresh credit key with 500 credits, bought through the sandbox checkout with the client itself. */
const creditClient = async (options: { readonly fetch?: typeof fetch; readonly sleep?: (ms: number) => Promise<void> } = {}, url = sandbox.url) => {
  const client = createClient({ baseUrl: url, apiKey: `morsel_test_${randomBytes(32).toString("hex")}`, ...options })
  const checkout = await client.checkout({ context: { channel: "node_quickstart" } })
  await fetch(`${url}/sandbox/checkout/${checkout.session_id}/pay`, { method: "POST" })
  return client
}

/** A fetch that records each request's headers as sent. */
const recorder = () => {
  const sent: Array<Headers> = []
  const recorded: typeof fetch = (input, init) => {
    sent.push(new Headers(input instanceof Request ? input.headers : init?.headers))
    return fetch(input, init)
  }
  return { sent, fetch: recorded }
}

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "morsel-client-"))
  sandbox = await startSandbox()
  phonePath = join(folder, "IMG_2041.jpg")
  // Stored sideways with EXIF orientation 6, as phones store a portrait photo.
  await noise(4032, 3024).jpeg({ quality: 92 }).withMetadata({ orientation: 6 }).toFile(phonePath)
  png = await noise(1100, 1000).png().toBuffer()
  webp = await noise(800, 600).webp().toBuffer()
}, 120_000)

afterAll(async () => {
  await sandbox?.close()
  rmSync(folder, { recursive: true, force: true })
})

/** The three photos: a path, bytes and a File, and what each must become. */
const photos = () => [
  { photo: phonePath, size: [1536, 2048], change: /^IMG_2041\.jpg: 3024×4032 JPEG \d+\.\d MB → 1536×2048 JPEG \d\.\d MB, turned upright$/ },
  { photo: new Uint8Array(png), size: [1100, 1000], change: /^the photo: 1100×1000 PNG 3\.\d MB → 1100×1000 JPEG \d\.\d MB$/ },
  { photo: new File([webp], "lunch.webp", { type: "image/webp" }), size: [800, 600], change: /^lunch\.webp: 800×600 WebP 0\.\d MB → 800×600 JPEG 0\.\d MB$/ }
]

const analyseAll = async (client: MorselClient) => {
  const results = []
  for (const { photo, size, change } of photos()) {
    let prepared: PreparedPhoto | undefined
    const result = await client.analyze(photo, { onPhoto: (p) => (prepared = p) })
    expect(prepared?.change).toMatch(change)
    const meta = await sharp(prepared?.bytes).metadata()
    expect([meta.width, meta.height, meta.format, meta.orientation ?? 1]).toEqual([...size, "jpeg", 1])
    expect(prepared?.bytes.length).toBeLessThanOrEqual(2_000_000)
    expect(result).toMatchObject({ estimate: true, model: "sandbox" })
    expect(result.items.length).toBeGreaterThan(0)
    results.push(result)
  }
  return results
}

describe("morsel/client", () => {
  it("a credit key: a 4032×3024 EXIF-rotated JPEG path, a 3 MB PNG's bytes and a WebP File, three credits", async () => {
    const client = await creditClient()
    expect(await client.balance()).toEqual({ credits_remaining: 500, blocked: false, test_mode: true })
    const results = await analyseAll(client)
    for (const result of results) expect(result.receipt).toBeUndefined()
    expect((await client.balance()).credits_remaining).toBe(497)
    // The same photo again is the same input: its Idempotency-Key was kept, so it replays and costs nothing.
    const again = await client.analyze(phonePath)
    expect(again.request_id).toBe(results[0]?.request_id)
    expect((await client.balance()).credits_remaining).toBe(497)
  }, 120_000)

  it("a wallet: the same three photos paid over x402, 0.01 USDC each, each with its receipt", async () => {
    const wallet = generatePrivateKey()
    const address = privateKeyToAccount(wallet).address
    const client = createClient({ baseUrl: sandbox.url, walletPrivateKey: wallet })
    const results = await analyseAll(client)
    for (const result of results) expect(result.receipt).toMatchObject({ success: true, network: "eip155:8453", payer: address, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) })
    expect(await units(address)).toBe(100_000_000n - 30_000n)
  }, 120_000)

  it("payment_pending: waits Retry-After and sends the identical request with the same signed authorization; one debit", async () => {
    const wallet = generatePrivateKey()
    const address = privateKeyToAccount(wallet).address
    const waits: Array<number> = []
    const sent = recorder()
    const client = createClient({ baseUrl: sandbox.url, walletPrivateKey: wallet, fetch: sent.fetch, sleep: async (ms) => void waits.push(ms) })
    const photo = await noise(640, 480).jpeg().toBuffer()

    const result = await client.analyze(photo, { scenario: "payment_pending" })

    expect(waits).toEqual([60_000])
    // The challenge, the paid request answered payment_pending, and its identical retry.
    expect(sent.sent).toHaveLength(3)
    const [unpaid, paid, retried] = sent.sent
    expect(unpaid?.get("payment-signature")).toBeNull()
    expect(paid?.get("payment-signature")).toBeTruthy()
    expect(retried?.get("payment-signature")).toBe(paid?.get("payment-signature"))
    expect(retried?.get("idempotency-key")).toBe(paid?.get("idempotency-key"))
    expect(result.receipt).toMatchObject({ success: true, payer: address })
    expect(await units(address)).toBe(100_000_000n - 10_000n)
  }, 60_000)

  it("payment_pending left to the caller: error.pending, kept as JSON, resumed once by a client without the wallet; one debit", async () => {
    const wallet = generatePrivateKey()
    const address = privateKeyToAccount(wallet).address
    const client = createClient({ baseUrl: sandbox.url, walletPrivateKey: wallet, paymentPendingRetries: 0 })
    const photo = await noise(600, 400).jpeg().toBuffer()

    const error = await client.analyze(photo, { scenario: "payment_pending", language: "lt" }).catch((e: unknown) => e)

    expect(error).toBeInstanceOf(MorselError)
    if (!(error instanceof MorselError)) return
    expect([error.status, error.code, error.retryAfter]).toEqual([503, "payment_pending", 60])
    expect(error.requestId).toMatch(/^[0-9a-f-]{36}$/)
    expect(error.pending?.paymentSignature).toBeTruthy()
    expect(JSON.stringify(error.pending)).not.toContain(wallet.slice(2))
    expect(await units(address)).toBe(100_000_000n)

    const kept = JSON.parse(JSON.stringify(error.pending))
    const result = await createClient({ baseUrl: sandbox.url }).resume(kept)
    expect(result.request_id).toBe(error.requestId)
    expect(await units(address)).toBe(100_000_000n - 10_000n)
    // Resumed again: the saved result replays, nothing more is paid.
    expect((await createClient({ baseUrl: sandbox.url }).resume(kept)).request_id).toBe(error.requestId)
    expect(await units(address)).toBe(100_000_000n - 10_000n)
  }, 60_000)

  it("refusals reject with MorselError: status, error.code and request_id; local failures name the photo", async () => {
    const client = await creditClient()
    const photo = await noise(320, 240).jpeg().toBuffer()
    const noFood = await client.analyze(photo, { scenario: "no_food" }).catch((e: unknown) => e)
    expect(noFood).toMatchObject({ name: "MorselError", status: 422, code: "no_food_detected", requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) })

    const broke = createClient({ baseUrl: sandbox.url, apiKey: `morsel_test_${"0".repeat(64)}` })
    await expect(broke.balance()).rejects.toMatchObject({ status: 401, code: "invalid_key" })
    await expect(createClient({ baseUrl: sandbox.url }).analyze(photo)).rejects.toMatchObject({ status: 402 })
    await expect(client.analyze(new Uint8Array([1, 2, 3]))).rejects.toMatchObject({ status: undefined, code: "photo_unreadable", message: "the photo is not a photo morsel can read (JPEG, PNG or WebP)" })
    await expect(client.analyze(join(folder, "missing.jpg"))).rejects.toMatchObject({ code: "photo_unreadable" })
    await expect(createClient({ baseUrl: "http://127.0.0.1:9" }).health()).rejects.toMatchObject({ code: "server_unreachable" })
    expect(() => createClient({ baseUrl: sandbox.url, walletPrivateKey: "0x12" })).toThrow(MorselError)
  }, 60_000)

  it("the credit endpoints: checkout, confirm, checkout-status, balance, feedback", async () => {
    const client = createClient({ baseUrl: sandbox.url, apiKey: `morsel_test_${randomBytes(32).toString("hex")}` })
    const orderId = crypto.randomUUID()
    const checkout = await client.checkout({ orderId, context: { channel: "node_quickstart", use_case: "food_logging" } })
    expect(checkout).toMatchObject({ order_id: orderId, credits: 500, amount_usd: "5.00", session_id: expect.stringMatching(/^cs_test_/) })
    expect((await client.checkoutStatus(orderId)).state).toBe("open")
    await fetch(`${sandbox.url}/sandbox/checkout/${checkout.session_id}/pay`, { method: "POST" })
    expect(await client.confirm(checkout.session_id ?? "")).toMatchObject({ credits_remaining: 500 })
    expect(await client.checkoutStatus(orderId.toUpperCase())).toMatchObject({ order_id: orderId, state: "paid", credits_remaining: 500 })
    const result = await client.analyze(await noise(400, 300).png().toBuffer(), { knownTotalGrams: 350 })
    expect(result.portion_basis).toEqual({ type: "supplied_total", total_grams: 350, allocation: "photo_estimated_proportions" })
    const feedback = { requestId: result.request_id, category: "wrong_portion", note: "less rice" } as const
    expect(await client.feedback(feedback)).toEqual({ recorded: true, duplicate: false, request_id: result.request_id })
    expect(await client.feedback(feedback)).toEqual({ recorded: true, duplicate: true, request_id: result.request_id })
    expect(await client.balance()).toEqual({ credits_remaining: 499, blocked: false, test_mode: true })
    await expect(createClient({ baseUrl: sandbox.url }).balance()).rejects.toMatchObject({ code: "usage" })
    expect((await client.health()).test_mode).toBe(true)
  }, 60_000)
})

describe("morsel/client with a slow model", () => {
  const scope = Effect.runSync(Scope.make())
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  it("an in-flight duplicate is waited out (409 in_progress) and gets the first one's result; one model call, one credit", async () => {
    const model = await Effect.runPromise(Scope.extend(startFakeOpenAI(), scope))
    model.setFallback(Reply.answer(chickenRice))
    const slow = await startSandbox({ env: { OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: model.url, VISION_MODEL: "gpt-test" } })
    try {
      const statuses: Array<number> = []
      const waits: Array<number> = []
      const observed: typeof fetch = async (input, init) => {
        const response = await fetch(input, init)
        if (String(input).endsWith("/v1/analyze")) statuses.push(response.status)
        return response
      }
      const client = await creditClient(
        {
          fetch: observed,
          sleep: async (ms) => {
            waits.push(ms)
            model.resume() // the first request's model answer arrives while the duplicate waits
            await new Promise((resolve) => setTimeout(resolve, 50))
          }
        },
        slow.url
      )
      const photo = await noise(500, 400).jpeg().toBuffer()
      model.pause()
      const first = client.analyze(photo)
      await Effect.runPromise(model.awaitRequests(1))
      const duplicate = client.analyze(photo)
      const [a, b] = await Promise.all([first, duplicate])

      expect(b.request_id).toBe(a.request_id)
      expect(b.dish_name).toBe("Grilled chicken with rice")
      expect(statuses[0]).toBe(409)
      expect(statuses.filter((s) => s === 200)).toHaveLength(2)
      expect(waits.length).toBeGreaterThan(0)
      expect(model.requests).toHaveLength(1)
      expect((await client.balance()).credits_remaining).toBe(499)
    } finally {
      await slow.close()
    }
  }, 240_000)
})
