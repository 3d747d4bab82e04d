// `npm start` on a fresh checkout: serves with no settings, and its embedded database survives a restart.
import { execFile, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newCreditKey } from "../../src/credits/keys.ts"
import { type FakeStripe, startFakeStripe } from "../support/fakeStripe.ts"
import { send } from "../support/http.ts"
import { freePort, root, serveProcess, waitForOutput } from "../support/process.ts"

describe("npm start", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "morsel-start-"))
  let stripe: FakeStripe

  beforeAll(async () => {
    // Asynchronously: a blocked worker misses its test runner's heartbeats on a busy machine.
    // Built only when a source is newer than the build (as `npm start` does), not once per test file.
    await promisify(execFile)(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root })
    stripe = await startFakeStripe()
  }, 120_000)
  afterAll(async () => {
    await stripe?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it("serves with no settings at all", async () => {
    const server = await serveProcess([], { MORSEL_DATA_DIR: join(dataDir, "bare") })
    try {
      const health = await send(`${server.url}/health`)
      expect(health.body).toMatchObject({ status: "ok", payment_network: "eip155:8453", x402_enabled: false, card_credits_enabled: false })
      const analyze = await send(`${server.url}/v1/analyze`, {
        body: { image_base64: "AAAA", mime_type: "image/png" },
        headers: { "idempotency-key": "fresh-start-check-1" }
      })
      expect(analyze.status).toBe(400)
      // Not a terminal: the banner is one JSON log line that names what is off and how to turn it on.
      const line = (await waitForOutput(server.output, '"morsel started"'))
        .split("\n")
        .find((l) => l.includes('"morsel started"'))
      expect(line, server.output()).toBeDefined()
      expect(JSON.parse(line!)).toMatchObject({
        message: "morsel started",
        annotations: {
          address: server.url,
          database: `embedded PostgreSQL in ${join(dataDir, "bare")}`,
          vision_model: "off: set OPENAI_API_KEY (until then analyses answer 503 model_unavailable)",
          card_credits: "off: set STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET",
          x402: "off: set X402_PAY_TO with X402_SETTLER_PRIVATE_KEY or X402_FACILITATOR_URL",
          metrics: "off: set METRICS=on",
          food_records: 8789,
          food_data: "USDA SR28 (shipped copy)"
        }
      })
    } finally {
      await server.stop()
    }
  }, 150_000)

  it("a port in use is one line on stderr and exit code 1, before anything else starts", async () => {
    const port = await freePort()
    const holder = createServer().listen(port, "127.0.0.1")
    try {
      const child = spawn(process.execPath, [join(root, "bin/morsel.js"), "serve"], {
        cwd: root,
        env: { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp", PORT: String(port), MORSEL_DATA_DIR: join(dataDir, "busy") },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      child.stdout?.on("data", (chunk) => (stdout += chunk))
      child.stderr?.on("data", (chunk) => (stderr += chunk))
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
      expect(code).toBe(1)
      expect(stdout).toBe("")
      expect(stderr.trim()).toBe(`morsel: port ${port} on 127.0.0.1 is already in use: stop the other server or set PORT`)
    } finally {
      holder.close()
    }
  }, 60_000)

  it("keeps purchased credits across a restart (embedded database on disk)", async () => {
    const env = { MORSEL_DATA_DIR: join(dataDir, "shop"), ...stripe.env }
    const key = newCreditKey(true)
    const auth = { authorization: `Bearer ${key}` }
    const first = await serveProcess([], { ...env, LOG_FORMAT: "pretty" })
    try {
      // LOG_FORMAT=pretty: the banner in words, one part a line.
      await waitForOutput(first.output, "food records")
      expect(first.output()).toContain(`morsel listening on ${first.url}`)
      expect(first.output()).toMatch(/^ {2}card credits +on +Stripe test mode, webhook at \/webhooks\/stripe$/m)
      expect(first.output()).toMatch(/^ {2}vision model +off +set OPENAI_API_KEY/m)
      const checkout = await send(`${first.url}/v1/credits/checkout`, { body: { order_id: crypto.randomUUID() }, headers: auth })
      expect(checkout.status, checkout.text).toBe(200)
      const sessionId = (checkout.body as { session_id: string }).session_id
      stripe.pay(sessionId)
      const confirm = await send(`${first.url}/v1/credits/confirm`, { body: { session_id: sessionId }, headers: auth })
      expect(confirm.body).toMatchObject({ credits_remaining: 500, blocked: false, test_mode: true })
    } finally {
      await first.stop()
    }
    const second = await serveProcess([], env)
    try {
      const balance = await send(`${second.url}/v1/credits/balance`, { headers: auth })
      expect(balance.status).toBe(200)
      expect(balance.body).toMatchObject({ credits_remaining: 500, blocked: false, test_mode: true })
    } finally {
      await second.stop()
    }
  }, 240_000)
})
