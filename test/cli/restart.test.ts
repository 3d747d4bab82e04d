// The built server killed with SIGKILL and started again: no request hangs meanwhile, and a crashed analysis's credit comes back with its lease.
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newCreditKey } from "../../src/credits/keys.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { type FakeStripe, startFakeStripe } from "../support/fakeStripe.ts"
import { send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { crash, freePort, root, type Served, serveProcess } from "../support/process.ts"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

type Outcome = { readonly kind: "answered"; readonly status: number } | { readonly kind: "refused" | "reset" | "hung"; readonly detail: string }

/** One GET /health that may not take longer than `patienceMs`: answered, refused, reset by a dying process, or hung. */
const probe = async (url: string, patienceMs: number): Promise<Outcome> => {
  try {
    const answer = await fetch(`${url}/health`, { signal: AbortSignal.timeout(patienceMs) })
    await answer.arrayBuffer()
    return { kind: "answered", status: answer.status }
  } catch (error) {
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause : undefined
    const code = cause && "code" in cause ? String(cause.code) : ""
    if (error instanceof Error && error.name === "TimeoutError") return { kind: "hung", detail: error.message }
    return { kind: code === "ECONNREFUSED" ? "refused" : "reset", detail: `${code} ${cause?.message ?? String(error)}` }
  }
}

/** Fires a probe every `everyMs` until stopped; answers every probe's outcome once all have ended. */
const probeContinuously = (url: string, everyMs: number, patienceMs: number) => {
  const probes: Array<Promise<Outcome>> = []
  const timer = setInterval(() => probes.push(probe(url, patienceMs)), everyMs)
  return async () => {
    clearInterval(timer)
    return Promise.all(probes)
  }
}

describe("SIGKILL and restart of the built server", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "morsel-restart-"))
  let stripe: FakeStripe
  const running: Array<Served> = []
  const start = async (env: Record<string, string>, port: number) => {
    const server = await serveProcess([], env, port)
    running.push(server)
    return server
  }

  beforeAll(async () => {
    // Asynchronously: a blocked worker misses its test runner's heartbeats on a busy machine.
    // Built only when a source is newer than the build (as `npm start` does), not once per test file.
    await promisify(execFile)(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root })
    stripe = await startFakeStripe()
  }, 180_000)
  afterAll(async () => {
    await Promise.all(running.map((server) => server.stop()))
    await stripe?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it("/health probes every 10 ms across a crash and a restart: each is answered or refused, none hangs", async () => {
    const env = { MORSEL_DATA_DIR: join(dataDir, "probes") }
    const port = await freePort()
    const first = await start(env, port)
    const finish = probeContinuously(first.url, 10, 20_000)
    await sleep(200)
    await crash(first)
    const second = await start(env, port)
    await sleep(300)
    const outcomes = await finish()
    await second.stop()

    const hung = outcomes.filter((o) => o.kind === "hung")
    expect(hung, `${hung.length} of ${outcomes.length} probes got no answer`).toEqual([])
    const statuses = new Set(outcomes.flatMap((o) => (o.kind === "answered" ? [o.status] : [])))
    // Only a healthy answer or a "not yet" (503 with Retry-After) is given.
    expect([...statuses].filter((s) => s !== 200 && s !== 503)).toEqual([])
    expect(outcomes.filter((o) => o.kind === "refused").length).toBeGreaterThan(0)
    expect(outcomes.at(-1)).toEqual({ kind: "answered", status: 200 })
  }, 300_000)

  it("a credit held by an analysis killed mid-way comes back when its lease ends, not minutes later", async () => {
    // A model that never answers keeps the analysis running until the process dies.
    const scope = Effect.runSync(Scope.make())
    const model = await Effect.runPromise(Scope.extend(startFakeOpenAI(), scope))
    model.setFallback(Reply.hang())
    const analysisTimeoutMs = 5_000
    const leaseMs = analysisTimeoutMs + 1_000 + 60_000
    const env = {
      MORSEL_DATA_DIR: join(dataDir, "crash"),
      ...stripe.env,
      OPENAI_API_KEY: "sk-fake",
      OPENAI_BASE_URL: model.url,
      ANALYSIS_TIMEOUT_MS: String(analysisTimeoutMs),
      X402_CONFIRM_TIMEOUT_MS: "1000"
    }
    const port = await freePort()
    const key = newCreditKey(true)
    const auth = { authorization: `Bearer ${key}` }
    try {
      const first = await start(env, port)
      const checkout = await send(`${first.url}/v1/credits/checkout`, { body: { order_id: crypto.randomUUID() }, headers: auth })
      const sessionId = (checkout.body as { session_id: string }).session_id
      stripe.pay(sessionId)
      const confirm = await send(`${first.url}/v1/credits/confirm`, { body: { session_id: sessionId }, headers: auth })
      expect(confirm.body).toMatchObject({ credits_remaining: 500 })

      const photo = await makeImage(320, 240, "jpeg")
      const claimedBefore = Date.now()
      send(`${first.url}/v1/analyze`, {
        body: { image_base64: photo.base64, mime_type: photo.mime },
        headers: { ...auth, "idempotency-key": "crashed-analysis-0001" }
      }).catch(() => undefined)
      await Effect.runPromise(model.awaitRequests(1))
      // The attempt's lease began between claimedBefore and now.
      const claimedAfter = Date.now()
      await crash(first)

      const second = await start(env, port)
      const restartedAt = Date.now()
      const balance = async () => {
        const answer = await send(`${second.url}/v1/credits/balance`, { headers: auth })
        expect(answer.status, answer.text).toBe(200)
        return (answer.body as { credits_remaining: number }).credits_remaining
      }
      // The credit is held while the lease lasts...
      expect(await balance()).toBe(499)
      let restoredAt: number | undefined
      while (restoredAt === undefined && Date.now() - claimedBefore < leaseMs + 60_000) {
        // Slow enough to stay inside the credit endpoints' 60 requests per key and minute.
        if ((await balance()) === 500) restoredAt = Date.now()
        else await sleep(1_500)
      }
      // ...and comes back within seconds of the lease's end (before: five minutes after the restart).
      expect(restoredAt, `the credit did not come back: ${second.output()}`).toBeDefined()
      expect(restoredAt! - claimedBefore).toBeGreaterThanOrEqual(leaseMs)
      const timing = `claimed within ${claimedAfter - claimedBefore} ms, restarted after ${restartedAt - claimedAfter} ms`
      expect(restoredAt! - claimedAfter, timing).toBeLessThan(leaseMs + 5_000)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 300_000)
})
