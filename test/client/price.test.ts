// `morsel/client` with a wallet against a server of ours that asks what it likes: the client signs only what an
// analysis costs (0.01 USDC, exact, on Base, in the token it pays with), refuses anything else before signing, and
// pays a higher price only when told it may.
import { createServer, type IncomingMessage } from "node:http"
import type { AddressInfo } from "node:net"
import { decodePaymentSignatureHeader, encodePaymentRequiredHeader } from "@x402/core/http"
import type { PaymentRequirements } from "@x402/core/types"
import sharp from "sharp"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { createClient, MorselError } from "../../src/client/index.ts"

const BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
const OTHER_TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
const PAY_TO = privateKeyToAccount(generatePrivateKey()).address

/** What a server answering SPEC §4.2 asks: 0.01 USDC, exact, on Base, native USDC. */
const fair: PaymentRequirements = {
  scheme: "exact",
  network: "eip155:8453",
  asset: BASE_USDC,
  amount: "10000",
  payTo: PAY_TO,
  maxTimeoutSeconds: 300,
  extra: { name: "USD Coin", version: "2" }
}

const photo = await sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 200, g: 150, b: 90 } } })
  .jpeg()
  .toBuffer()

const RESULT = { request_id: "7d0c1f6e-3c0a-4a51-9d1e-2f8b8c0e4a11", dish_name: "Rice", items: [], estimate: true }

/** The server's terms for the next requests, and every analysis request it received (with its PAYMENT-SIGNATURE, if any). */
let asked: ReadonlyArray<PaymentRequirements> = [fair]
let received: Array<IncomingMessage["headers"]> = []
let baseUrl = ""
const server = createServer((req, res) => {
  received.push(req.headers)
  req.resume()
  req.on("end", () => {
    if (req.headers["payment-signature"] === undefined) {
      const challenge = encodePaymentRequiredHeader({ x402Version: 2, resource: { url: `${baseUrl}/v1/analyze` }, accepts: [...asked] })
      res.writeHead(402, { "content-type": "application/json", "payment-required": challenge })
      res.end("{}")
      return
    }
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify(RESULT))
  })
})

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))
beforeEach(() => {
  received = []
})

/** The payments the server received, as their signed terms. */
const paid = () =>
  received.flatMap((headers) => {
    const header = headers["payment-signature"]
    return typeof header === "string" ? [decodePaymentSignatureHeader(header).accepted] : []
  })

const refusedWith = async (promise: Promise<unknown>) => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e
  )
  expect(error).toBeInstanceOf(MorselError)
  return error as MorselError
}

describe("a wallet pays only what an analysis costs", () => {
  it("a server asking 1 USDC an analysis: MorselError naming the price, nothing signed, no PAYMENT-SIGNATURE sent", async () => {
    asked = [{ ...fair, amount: "1000000" }]
    const client = createClient({ baseUrl, walletPrivateKey: generatePrivateKey() })
    const error = await refusedWith(client.analyze(photo))
    expect(error.code).toBe("price_refused")
    expect(error.status).toBe(402)
    expect(error.message).toContain("1 USDC")
    expect(error.message).toContain("at most 0.01 USDC")
    expect(error.message).toContain("maxPricePerAnalysis")
    expect(received).toHaveLength(1)
    expect(received[0]?.["payment-signature"]).toBeUndefined()
  })

  it("0.01 USDC is paid, signed for exactly 10000 units", async () => {
    asked = [fair]
    const client = createClient({ baseUrl, walletPrivateKey: generatePrivateKey() })
    expect(await client.analyze(photo)).toMatchObject({ request_id: RESULT.request_id })
    expect(paid()).toEqual([expect.objectContaining({ amount: "10000", asset: BASE_USDC, network: "eip155:8453", scheme: "exact" })])
  })

  it("maxPricePerAnalysis raises the cap: 1 USDC is paid when allowed, 1.5 USDC still refused", async () => {
    asked = [{ ...fair, amount: "1000000" }]
    const client = createClient({ baseUrl, walletPrivateKey: generatePrivateKey(), maxPricePerAnalysis: "1" })
    await client.analyze(photo)
    expect(paid().map((terms) => terms.amount)).toEqual(["1000000"])
    asked = [{ ...fair, amount: "1500000" }]
    received = []
    const error = await refusedWith(client.analyze(photo, { idempotencyKey: "another-analysis-0001" }))
    expect(error.message).toContain("1.5 USDC")
    expect(error.message).toContain("at most 1 USDC")
    expect(paid()).toEqual([])
  })

  it("of several offers, the one within the terms is signed", async () => {
    asked = [{ ...fair, amount: "5000000" }, fair]
    const client = createClient({ baseUrl, walletPrivateKey: generatePrivateKey() })
    await client.analyze(photo)
    expect(paid().map((terms) => terms.amount)).toEqual(["10000"])
  })

  it("another token, another network or another scheme at 0.01 is refused, naming what was asked", async () => {
    const client = createClient({ baseUrl, walletPrivateKey: generatePrivateKey() })
    const others: ReadonlyArray<readonly [PaymentRequirements, string]> = [
      [{ ...fair, asset: OTHER_TOKEN }, OTHER_TOKEN],
      [{ ...fair, network: "eip155:1" }, "eip155:1"],
      [{ ...fair, scheme: "upto" }, "upto"]
    ]
    for (const [terms, named] of others) {
      asked = [terms]
      const error = await refusedWith(client.analyze(photo, { idempotencyKey: `other-terms-${named.slice(-8)}-0001` }))
      expect(error.code).toBe("price_refused")
      expect(error.message).toContain(named)
    }
    expect(paid()).toEqual([])
  })

  it("a deployment on its own token is paid in it when the client names it (paymentAsset), and only then", async () => {
    asked = [{ ...fair, asset: OTHER_TOKEN }]
    const client = createClient({ baseUrl, walletPrivateKey: generatePrivateKey(), paymentAsset: OTHER_TOKEN })
    await client.analyze(photo)
    expect(paid()).toEqual([expect.objectContaining({ amount: "10000", asset: OTHER_TOKEN })])
    // Named so, Base's USDC is no longer what it pays with.
    asked = [fair]
    received = []
    await refusedWith(client.analyze(photo, { idempotencyKey: "own-token-then-usdc-01" }))
    expect(paid()).toEqual([])
  })

  it("a cap or token that is not one is refused when the client is made", () => {
    const wallet = generatePrivateKey()
    for (const maxPricePerAnalysis of ["", "0", "-1", "1e3", "0.0000001", "one", " 0.05"]) {
      expect(() => createClient({ baseUrl, walletPrivateKey: wallet, maxPricePerAnalysis }), maxPricePerAnalysis).toThrow(MorselError)
    }
    expect(() => createClient({ baseUrl, walletPrivateKey: wallet, paymentAsset: "0x1234" })).toThrow(/paymentAsset/)
    expect(createClient({ baseUrl, walletPrivateKey: wallet, maxPricePerAnalysis: "0.05" }).baseUrl).toBe(baseUrl)
  })
})
