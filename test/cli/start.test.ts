// `npm start` on a fresh checkout: serves with no settings, and its embedded database survives a restart.
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newCreditKey } from "../../src/credits/keys.ts"
import { type FakeStripe, startFakeStripe } from "../support/fakeStripe.ts"
import { send } from "../support/http.ts"
import { serve, stop } from "../support/process.ts"

const root = join(import.meta.dirname, "../..")

describe("npm start", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "morsel-start-"))
  let stripe: FakeStripe

  beforeAll(async () => {
    // Asynchronously: a blocked worker misses its test runner's heartbeats on a busy machine.
    await promisify(execFile)("npm", ["run", "build"], { cwd: root })
    stripe = await startFakeStripe()
  }, 120_000)
  afterAll(async () => {
    await stripe?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it("serves with no settings at all", async () => {
    const server = await serve({ MORSEL_DATA_DIR: join(dataDir, "bare") })
    try {
      const health = await send(`${server.url}/health`)
      expect(health.body).toMatchObject({ status: "ok", payment_network: "eip155:8453", x402_enabled: false, card_credits_enabled: false })
      const analyze = await send(`${server.url}/v1/analyze`, {
        body: { image_base64: "AAAA", mime_type: "image/png" },
        headers: { "idempotency-key": "fresh-start-check-1" }
      })
      expect(analyze.status).toBe(400)
    } finally {
      await stop(server)
    }
  }, 60_000)

  it("keeps purchased credits across a restart (embedded database on disk)", async () => {
    const env = { MORSEL_DATA_DIR: join(dataDir, "shop"), ...stripe.env }
    const key = newCreditKey(true)
    const auth = { authorization: `Bearer ${key}` }
    const first = await serve(env)
    try {
      const checkout = await send(`${first.url}/v1/credits/checkout`, { body: { order_id: crypto.randomUUID() }, headers: auth })
      expect(checkout.status, checkout.text).toBe(200)
      const sessionId = (checkout.body as { session_id: string }).session_id
      stripe.pay(sessionId)
      const confirm = await send(`${first.url}/v1/credits/confirm`, { body: { session_id: sessionId }, headers: auth })
      expect(confirm.body).toMatchObject({ credits_remaining: 500, blocked: false, test_mode: true })
    } finally {
      await stop(first)
    }
    const second = await serve(env)
    try {
      const balance = await send(`${second.url}/v1/credits/balance`, { headers: auth })
      expect(balance.status).toBe(200)
      expect(balance.body).toMatchObject({ credits_remaining: 500, blocked: false, test_mode: true })
    } finally {
      await stop(second)
    }
  }, 90_000)
})
