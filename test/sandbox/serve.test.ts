// `morsel serve --sandbox` as a user runs it (the built CLI, no settings), used with official clients only:
// fetch, @x402/fetch with a fresh random wallet, and the MCP SDK client.
import { execFile } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeImage } from "../support/images.ts"
import { metricSample } from "../support/http.ts"
import { crash, root, type Served, serveProcess, waitForOutput } from "../support/process.ts"

const BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly body: Record<string, unknown>
  readonly text: string
}

const reply = async (response: Response): Promise<Reply> => {
  const text = await response.text()
  let body: Record<string, unknown> = {}
  try {
    body = JSON.parse(text) as Record<string, unknown>
  } catch {
    // an HTML page
  }
  return { status: response.status, headers: response.headers, body, text }
}

const errorCode = (r: Reply) => (r.body["error"] as { code?: string } | undefined)?.code

describe("morsel serve --sandbox", () => {
  let sandbox: Served
  let url = ""
  const output = () => sandbox.output()
  let photo: { base64: string; mime: "image/jpeg" | "image/png" }

  const call = async (path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) =>
    reply(
      await fetch(`${url}${path}`, {
        method: init.method ?? (init.body === undefined ? "GET" : "POST"),
        headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
      })
    )
  const analyze = (headers: Record<string, string>, fetcher: typeof fetch = fetch) =>
    fetcher(`${url}/v1/analyze`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": `sandbox-${randomUUID()}`, ...headers },
      body: JSON.stringify({ image_base64: photo.base64, mime_type: photo.mime })
    }).then(reply)
  const balance = async (key: string) => (await call("/v1/credits/balance", { headers: { authorization: `Bearer ${key}` } })).body["credits_remaining"]
  const walletUnits = async (address: string) => BigInt(String((await call(`/sandbox/wallets/${address}`)).body["units"]))

  /** A new test key with 500 credits, bought through the sandbox checkout: the page, then its Pay action. */
  const buyCredits = async () => {
    const key = `morsel_test_${randomBytes(32).toString("hex")}`
    const checkout = await call("/v1/credits/checkout", { headers: { authorization: `Bearer ${key}` }, body: { order_id: randomUUID() } })
    expect(checkout.status, checkout.text).toBe(200)
    const sessionId = String(checkout.body["session_id"])
    expect(sessionId).toMatch(/^cs_test_/)
    expect(String(checkout.body["checkout_url"])).toBe(`${url}/sandbox/checkout/${sessionId}`)
    const page = await reply(await fetch(String(checkout.body["checkout_url"])))
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toContain("text/html")
    expect(page.text).toContain("Pay")
    const paid = await reply(await fetch(`${url}/sandbox/checkout/${sessionId}/pay`, { method: "POST" }))
    expect(paid.status, paid.text).toBe(200)
    return key
  }

  beforeAll(async () => {
    // Built without blocking the test worker (a blocked worker loses its link to the runner).
    // Built only when a source is newer than the build (as `npm start` does), not once per test file.
    await promisify(execFile)(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root })
    photo = await makeImage(64, 48)
    sandbox = await serveProcess(["--sandbox"], { METRICS: "on", LOG_FORMAT: "json" })
    url = sandbox.url
    await waitForOutput(output, "morsel SANDBOX on")
  }, 180_000)

  afterAll(async () => {
    await sandbox?.stop()
  })

  it("says in words and on every response that it is the sandbox", async () => {
    expect(output()).toContain("nothing is charged")
    expect(output()).toContain("Sandbox-Scenario")
    const health = await call("/health")
    expect(health.body).toMatchObject({ status: "ok", test_mode: true, sandbox: true, x402_enabled: true, card_credits_enabled: true })
    expect(health.headers.get("morsel-sandbox")).toBe("true")
    expect((await call("/no/such/path")).headers.get("morsel-sandbox")).toBe("true")
  })

  it("sells credits through its checkout page and spends one per analysis (500 → 499)", async () => {
    const key = await buyCredits()
    expect(await balance(key)).toBe(500)
    const result = await analyze({ authorization: `Bearer ${key}` })
    expect(result.status, result.text).toBe(200)
    expect(result.body["model"]).toBe("sandbox")
    const items = result.body["items"] as ReadonlyArray<{ nutrition_source: string }>
    expect(items.length).toBeGreaterThan(0)
    expect(items.every((item) => item.nutrition_source === "usda")).toBe(true)
    expect(await balance(key)).toBe(499)
  }, 60_000)

  it("takes the production x402 challenge, paid by a fresh wallet through @x402/fetch: receipt, 0.01 USDC moved", async () => {
    const unpaid = await analyze({})
    expect(unpaid.status).toBe(402)
    const challenge = decodePaymentRequiredHeader(unpaid.headers.get("payment-required") ?? "")
    expect(challenge.accepts[0]).toMatchObject({ scheme: "exact", network: "eip155:8453", amount: "10000", asset: BASE_USDC })

    const wallet = privateKeyToAccount(generatePrivateKey())
    expect(await walletUnits(wallet.address)).toBe(100_000_000n)
    const paying = wrapFetchWithPayment(fetch, new x402Client().register("eip155:*", new ExactEvmScheme(wallet)))
    const paid = await analyze({}, paying)
    expect(paid.status, paid.text).toBe(200)
    const receipt = decodePaymentResponseHeader(paid.headers.get("payment-response") ?? "")
    expect(receipt).toMatchObject({ success: true, network: "eip155:8453" })
    expect(receipt.transaction).toMatch(/^0x[0-9a-f]{64}$/)
    expect(await walletUnits(wallet.address)).toBe(100_000_000n - 10_000n)
  }, 60_000)

  it("answers the MCP SDK client's analyze_food with the same key", async () => {
    const key = await buyCredits()
    const client = new Client({ name: "sandbox-test", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }))
    try {
      const result = await client.callTool({
        name: "analyze_food",
        arguments: { image_base64: photo.base64, mime_type: photo.mime, idempotency_key: `sandbox-mcp-${randomUUID()}` }
      })
      expect(result.isError ?? false).toBe(false)
      expect(result.structuredContent).toMatchObject({ model: "sandbox" })
    } finally {
      await client.close()
    }
    expect(await balance(key)).toBe(499)
  }, 60_000)

  it("forces each documented outcome with Sandbox-Scenario and charges nothing for any", async () => {
    const key = await buyCredits()
    const bearer = { authorization: `Bearer ${key}` }
    const outcomes = [
      ["no_food", 422, "no_food_detected"],
      ["analysis_failed", 502, "analysis_failed"],
      ["analysis_timeout", 504, "analysis_timeout"],
      ["rate_limited", 429, "rate_limited"]
    ] as const
    for (const [scenario, status, code] of outcomes) {
      const answer = await analyze({ ...bearer, "sandbox-scenario": scenario })
      expect([scenario, answer.status, errorCode(answer)]).toEqual([scenario, status, code])
    }
    const unknown = await analyze({ ...bearer, "sandbox-scenario": "meteor_strike" })
    expect(unknown.status).toBe(400)
    expect(await balance(key)).toBe(500)

    // The same outcomes paid per call: the wallet keeps its 100 USDC.
    const wallet = privateKeyToAccount(generatePrivateKey())
    for (const [scenario, status] of outcomes) {
      const paying = wrapFetchWithPayment(fetch, new x402Client().register("eip155:*", new ExactEvmScheme(wallet)))
      const answer = await analyze({ "sandbox-scenario": scenario }, paying)
      expect([scenario, answer.status]).toEqual([scenario, status])
    }
    expect(await walletUnits(wallet.address)).toBe(100_000_000n)
  }, 120_000)

  it("payment_pending: 503 first, nothing moved; the identical retry settles once", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey())
    const sent: Array<string> = []
    const recording: typeof fetch = (input, init) => {
      const signature = new Headers(input instanceof Request ? input.headers : init?.headers).get("payment-signature")
      if (signature !== null) sent.push(signature)
      return fetch(input, init)
    }
    const paying = wrapFetchWithPayment(recording, new x402Client().register("eip155:*", new ExactEvmScheme(wallet)))
    const idempotencyKey = `sandbox-pending-${randomUUID()}`
    const pending = await analyze({ "idempotency-key": idempotencyKey, "sandbox-scenario": "payment_pending" }, paying)
    expect(pending.status, pending.text).toBe(503)
    expect(errorCode(pending)).toBe("payment_pending")
    expect(pending.headers.get("retry-after")).toBe("60")
    const signature = sent.at(-1)
    expect(signature).toBeDefined()
    expect(await walletUnits(wallet.address)).toBe(100_000_000n)

    const retry = await analyze({ "idempotency-key": idempotencyKey, "sandbox-scenario": "payment_pending", "payment-signature": signature ?? "" })
    expect(retry.status, retry.text).toBe(200)
    expect(decodePaymentResponseHeader(retry.headers.get("payment-response") ?? "")).toMatchObject({ success: true })
    expect(await walletUnits(wallet.address)).toBe(100_000_000n - 10_000n)

    // A credit key is never pending: said so, nothing spent.
    const key = await buyCredits()
    const refused = await analyze({ authorization: `Bearer ${key}`, "sandbox-scenario": "payment_pending" })
    expect(refused.status).toBe(400)
    expect(await balance(key)).toBe(500)
  }, 60_000)

  it("METRICS=on: the counters moved with the credit analyses, the x402 payments and the failures above", async () => {
    const metrics = await call("/metrics")
    expect(metrics.status).toBe(200)
    const sample = (series: string) => metricSample(metrics.text, series)
    // Credits: four packs bought, two spent (REST and MCP above); x402: two paid, one of them pending first.
    expect(sample("morsel_credits_granted_total")).toBe(2000)
    expect(sample("morsel_credits_consumed_total")).toBeGreaterThanOrEqual(2)
    expect(sample('morsel_x402_settlements_total{outcome="settled"}')).toBeGreaterThanOrEqual(2)
    expect(sample('morsel_x402_settlements_total{outcome="payment_pending"}')).toBe(1)
    expect(sample('morsel_analyses_total{outcome="analysis_failed"}')).toBe(2)
    expect(sample('morsel_analyses_total{outcome="no_food_detected"}')).toBe(2)
    expect(sample('morsel_http_requests_total{route="/v1/analyze",status="200"}')).toBeGreaterThanOrEqual(3)
    expect(sample("morsel_x402_pending")).toBe(0)

    // Every line logged about an analysis names it and how it is paid.
    const finished = output()
      .split("\n")
      .filter((line) => line.includes('"analysis finished"'))
      .map((line) => JSON.parse(line) as { annotations: Record<string, unknown> })
    expect(finished.length).toBeGreaterThanOrEqual(5)
    for (const line of finished) {
      expect(line.annotations["request_id"]).toMatch(/^[0-9a-f-]{36}$/)
      expect(["credit", "x402"]).toContain(line.annotations["funding"])
    }
  })

  it("stopped by SIGTERM sent again while it stops (a process group, a service manager): it still removes its folder", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "morsel-sandbox-tmp-"))
    try {
      const served = await serveProcess(["--sandbox"], { TMPDIR: tmp })
      expect(readdirSync(tmp).filter((name) => name.startsWith("morsel-memory-"))).toHaveLength(1)
      const gone = new Promise<void>((resolve) => served.child.once("exit", () => resolve()))
      served.child.kill("SIGTERM")
      for (const wait of [5, 50, 200]) {
        await new Promise((resolve) => setTimeout(resolve, wait))
        served.child.kill("SIGTERM")
      }
      await gone
      expect([served.child.signalCode, readdirSync(tmp)]).toEqual([null, []])
    } finally {
      rmSync(tmp, { recursive: true, force: true })
    }
  })

  it("keeps its database in a folder of its own in TMPDIR, gone when it stops; one a killed sandbox left goes at the next start", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "morsel-sandbox-tmp-"))
    const folders = () => readdirSync(tmp).filter((name) => name.startsWith("morsel-memory-"))
    try {
      const killed = await serveProcess(["--sandbox"], { TMPDIR: tmp })
      const [left] = folders()
      expect(folders()).toHaveLength(1)
      await crash(killed)
      expect(folders()).toEqual([left])

      const next = await serveProcess(["--sandbox"], { TMPDIR: tmp })
      const own = folders()
      expect(own).toHaveLength(1)
      expect(own).not.toContain(left)
      const key = `morsel_test_${randomBytes(32).toString("hex")}`
      const checkout = await reply(
        await fetch(`${next.url}/v1/credits/checkout`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ order_id: randomUUID() })
        })
      )
      expect(checkout.status, checkout.text).toBe(200)
      await next.stop()
      expect(folders()).toEqual([])
    } finally {
      rmSync(tmp, { recursive: true, force: true })
    }
  }, 180_000)

  it("a temporary directory it cannot write is one line naming TMPDIR, exit code 1", async () => {
    const failed = await promisify(execFile)(process.execPath, [join(root, "bin/morsel.js"), "serve", "--sandbox"], {
      cwd: root,
      env: { PATH: process.env["PATH"] ?? "", PORT: "0", TMPDIR: join(tmpdir(), `morsel-missing-${randomUUID()}`) }
    }).then(
      () => undefined,
      (error: { code?: number; stderr?: string }) => error
    )
    expect(failed?.code).toBe(1)
    const lines = (failed?.stderr ?? "").trim().split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toContain("TMPDIR")
  }, 60_000)
})
