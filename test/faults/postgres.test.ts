// PostgreSQL goes away (cut, refused, stalled, slow) under the built service while paying customers use it: every request is answered in time, nothing is lost.
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { isRecord } from "../support/http.ts"
import { realPostgresUrl } from "../support/database.ts"
import type { Served } from "../support/process.ts"
import { type Answer, boughtKey, buildOnce, call, LEASE_MS, ledger, PRICE, paymentFor, query, sleep, startWorld, Tally, transfersTo, type World } from "./world.ts"

if (!realPostgresUrl) console.warn("test/faults: skipped (set TEST_DATABASE_URL to a real PostgreSQL server to inject its faults)")

/** The longest any request may take to be answered while the database is away. */
const DEADLINE_MS = 15_000

/** The REST 503 codes; MCP answers them as tool errors. */
const UNAVAILABLE = ["storage_unavailable", "payment_pending", "model_unavailable", "payments_unavailable", "processor_unavailable", "starting"]

/** `analyze_food` called as a 2025-era client calls it: one JSON-RPC request, no session. */
const mcpHeaders = (auth: Record<string, string>) => ({ ...auth, accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" })
const mcpCall = (key: string, photo: Record<string, unknown>) => ({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: { name: "analyze_food", arguments: { ...photo, idempotency_key: key } }
})

/** `error` of a REST answer's body, or of an MCP tool result's structuredContent. */
const errorOf = (answer: Answer | undefined): Record<string, unknown> | undefined => {
  const body = answer?.body
  if (!isRecord(body)) return undefined
  const content = isRecord(body["result"]) ? body["result"]["structuredContent"] : body
  if (isRecord(body["error"]) && body["jsonrpc"] === "2.0") return body["error"]
  return isRecord(content) && isRecord(content["error"]) ? content["error"] : undefined
}

describe.skipIf(!realPostgresUrl)("PostgreSQL faults under the built service", () => {
  let world: World
  let server: Served

  beforeAll(async () => {
    await buildOnce()
    world = await startWorld()
    server = await world.start()
  }, 240_000)
  afterAll(async () => {
    await world?.close()
  })

  const body = () => ({ image_base64: world.photo.base64, mime_type: world.photo.mime })

  /** Asks the balance until it answers 200; how long that took after `since`. */
  const servesAgainAfter = async (key: string, since: number) => {
    const tally = new Tally()
    for (;;) {
      const answer = await call(tally, "balance", `${server.url}/v1/credits/balance`, { headers: { authorization: `Bearer ${key}` }, deadlineMs: DEADLINE_MS })
      if (answer?.status === 200) return Date.now() - since
      if (Date.now() - since > 30_000) throw new Error(`no 200 within 30 s of the database's return: ${tally.summary()}`)
      await sleep(100)
    }
  }

  it("cut and refused for three seconds under a mixed load: each request answered in time, then served again, nothing lost or spent twice", async () => {
    const { proxy, stripe, chain } = world
    const creditKey = await boughtKey(server.url, stripe)
    const auth = { authorization: `Bearer ${creditKey}` }
    // A second key whose payment lands while the database is away: its webhook and confirm meet the outage.
    const buyer = (await import("../../src/credits/keys.ts")).newCreditKey(true)
    const buyerAuth = { authorization: `Bearer ${buyer}` }
    const orderId = randomUUID()
    const checkout = await call(new Tally(), "checkout", `${server.url}/v1/credits/checkout`, { headers: buyerAuth, body: { order_id: orderId } })
    const sessionId = isRecord(checkout?.body) ? String(checkout.body["session_id"]) : ""
    stripe.pay(sessionId)

    const payers = chain.accounts.payers.slice(0, 2)
    const payments = await Promise.all(
      Array.from({ length: 6 }, (_, i) => paymentFor(server.url, payers[i % 2]!, body()).then((signature) => ({ signature, key: `x402-outage-${i}-${randomUUID()}` })))
    )
    const creditKeys = Array.from({ length: 10 }, (_, i) => `credit-outage-${i}-${randomUUID()}`)
    const mcpKeys = Array.from({ length: 3 }, (_, i) => `mcp-outage-${i}-${randomUUID()}`)
    const before = { credits: (await ledger(world.directUrl)).find((a) => a.grants === 1)?.available, transfers: (await transfersTo(chain, payers.map((p) => p.address))).length }

    const tally = new Tally()
    // Each analysis's answer during the outage, with its key and when it came (for SPEC §7's request_id below).
    const analyses: Array<{ key: string; at: number; error: Record<string, unknown> | undefined; status: number | undefined }> = []
    const noted = (key: string) => (answer: Answer | undefined) => {
      analyses.push({ key, at: Date.now(), error: errorOf(answer), status: answer?.status })
      return answer
    }
    const analyzeCredit = (key: string) =>
      call(tally, "analyze credit", `${server.url}/v1/analyze`, { headers: { ...auth, "idempotency-key": key }, body: body(), deadlineMs: DEADLINE_MS }).then(noted(key))
    const analyzeX402 = (p: { signature: string; key: string }) =>
      call(tally, "analyze x402", `${server.url}/v1/analyze`, {
        headers: { "payment-signature": p.signature, "idempotency-key": p.key },
        body: body(),
        deadlineMs: DEADLINE_MS
      }).then(noted(p.key))
    const analyzeMcp = (t: Tally, key: string, deadlineMs = DEADLINE_MS) => call(t, "analyze mcp", `${server.url}/mcp`, { headers: mcpHeaders(auth), body: mcpCall(key, body()), deadlineMs })
    const webhook = async () => {
      const started = Date.now()
      try {
        const delivery = await stripe.sendWebhook(`${server.url}/webhooks/stripe`, stripe.events.completed(sessionId))
        const parsed: unknown = JSON.parse(delivery.body)
        const error = isRecord(parsed) && isRecord(parsed["error"]) ? parsed["error"] : undefined
        tally.answers.push({
          what: "webhook",
          status: delivery.status,
          code: typeof error?.["code"] === "string" ? error["code"] : undefined,
          retryAfter: delivery.retryAfter,
          ms: Date.now() - started,
          body: parsed,
          headers: new Headers()
        })
        return delivery.status
      } catch (e) {
        tally.unreachable.push(`webhook: ${String(e)}`)
        return 0
      }
    }

    // The load runs in waves, 150 ms apart; the database goes away during the second wave and comes back 3 s later.
    const inFlight: Array<Promise<unknown>> = []
    const wave = (n: number) => {
      inFlight.push(analyzeCredit(creditKeys[n]!), analyzeCredit(creditKeys[n + 5]!), analyzeX402(payments[n]!), analyzeMcp(tally, mcpKeys[n]!).then(noted(mcpKeys[n]!)))
      inFlight.push(call(tally, "balance", `${server.url}/v1/credits/balance`, { headers: auth, deadlineMs: DEADLINE_MS }))
      inFlight.push(call(tally, "checkout-status", `${server.url}/v1/credits/checkout-status`, { headers: buyerAuth, body: { order_id: orderId }, deadlineMs: DEADLINE_MS }))
      inFlight.push(call(tally, "confirm", `${server.url}/v1/credits/confirm`, { headers: buyerAuth, body: { session_id: sessionId }, deadlineMs: DEADLINE_MS }))
      inFlight.push(webhook())
    }
    wave(0)
    await sleep(150)
    proxy.refuse()
    const cutAt = Date.now()
    const cutConnections = proxy.cut()
    wave(1)
    await sleep(1_000)
    wave(2)
    await sleep(2_000)
    proxy.pass()
    const back = Date.now()
    await Promise.all(inFlight)
    const servedAgainMs = await servesAgainAfter(creditKey, back)

    // Afterwards each caller retries what was not completed, with the same Idempotency-Key and payment: each converges.
    // An attempt the outage cut off answers in_progress (409, retry unchanged) only until its instance, which saw it
    // end, has closed it once the database is back: long before its lease would end.
    const settle = async <A>(what: () => Promise<A | undefined>, done: (a: A | undefined) => boolean) => {
      const until = Date.now() + LEASE_MS + 15_000
      for (;;) {
        const answer = await what()
        if (done(answer) || Date.now() > until) return answer
        await sleep(1_000)
      }
    }
    const final = new Tally()
    const finished = (a: { status: number } | undefined) => a !== undefined && a.status !== 503 && a.status !== 409
    const results = new Map<string, unknown>()
    for (const key of creditKeys) {
      const answer = await settle(() => call(final, "retry credit", `${server.url}/v1/analyze`, { headers: { ...auth, "idempotency-key": key }, body: body() }), finished)
      expect(answer?.status, `credit retry ${key}: ${JSON.stringify(answer?.body)}`).toBe(200)
      results.set(key, answer?.body)
    }
    for (const p of payments) {
      const answer = await settle(
        () => call(final, "retry x402", `${server.url}/v1/analyze`, { headers: { "payment-signature": p.signature, "idempotency-key": p.key }, body: body() }),
        finished
      )
      expect(answer?.status, `x402 retry ${p.key}: ${JSON.stringify(answer?.body)}`).toBe(200)
      results.set(p.key, answer?.body)
    }
    for (const key of mcpKeys) {
      const answer = await settle(() => analyzeMcp(final, key, 20_000), (a) => a?.status === 200 && errorOf(a) === undefined)
      expect(errorOf(answer), `MCP retry ${key}`).toBeUndefined()
    }
    const convergedMs = Date.now() - back
    // A second round of retries replays exactly the same results.
    for (const key of creditKeys) {
      const again = await call(final, "replay credit", `${server.url}/v1/analyze`, { headers: { ...auth, "idempotency-key": key }, body: body() })
      expect(again?.body).toEqual(results.get(key))
    }
    // The late payment: the processor redelivers its webhook until it is taken; confirm agrees.
    await settle(webhook, (status) => status === 200)
    const confirmed = await call(final, "confirm", `${server.url}/v1/credits/confirm`, { headers: buyerAuth, body: { session_id: sessionId } })
    expect(confirmed?.body).toMatchObject({ credits_remaining: 500 })

    const after = await ledger(world.directUrl)
    const paidTransfers = await transfersTo(chain, payers.map((p) => p.address))
    const figures = {
      requests: tally.summary(),
      cutConnections,
      outageMs: back - cutAt,
      servedAgainMs,
      convergedMs,
      retries: final.summary(),
      credits: { before: before.credits, after: after.find((a) => a.fingerprint !== undefined && a.consumed > 0)?.available },
      transfers: { before: before.transfers, after: paidTransfers.length },
      proxy: proxy.stats()
    }
    console.log(`[faults] postgres outage: ${JSON.stringify(figures)}`)

    expect(tally.hung, tally.summary()).toEqual([])
    expect(tally.unreachable, tally.summary()).toEqual([])
    expect(tally.broken([402, 409]), tally.summary()).toEqual([])
    expect(servedAgainMs).toBeLessThan(5_000)
    // Nineteen retries, one after another, each waiting a second after a 409: all served within seconds of the
    // database's return, where an attempt the outage cut off held its key until its lease ended (64 s).
    expect(convergedMs).toBeLessThan(15_000)
    // SPEC §7: an answer about an analysis that was reserved names it. Every 503 of the outage (on MCP, a tool error
    // with a 503 code) whose attempt the database recorded before the answer came carries that attempt's request_id.
    const attempts = await query<{ idempotency_key: string; request_id: string; created_at: Date }>(
      world.directUrl,
      "SELECT idempotency_key, request_id::text AS request_id, created_at FROM analysis_requests"
    )
    const unavailable = analyses.filter((a) => a.error !== undefined && (a.status === 503 || UNAVAILABLE.includes(String(a.error["code"]))))
    const unnamed = unavailable.filter((a) => {
      const recorded = attempts.filter((r) => r.idempotency_key === a.key && new Date(r.created_at).getTime() <= a.at).map((r) => r.request_id)
      return recorded.length > 0 && !recorded.includes(String(a.error?.["request_id"]))
    })
    console.log(`[faults] outage 503s about analyses: ${unavailable.length}, with request_id: ${unavailable.filter((a) => a.error?.["request_id"] !== undefined).length}`)
    expect(unnamed).toEqual([])
    // Ledger: every account equals its entries; 13 analyses (10 over REST, 3 over MCP) consumed 13 credits; the late order granted once.
    for (const a of after) {
      expect(a.available).toBe(a.entriesAvailable)
      expect(a.reserved).toBe(a.entriesReserved)
      expect(a.reserved).toBe(0)
      expect(a.grants).toBe(1)
    }
    expect(after.map((a) => a.consumed).sort()).toEqual([0, 13])
    expect(after.map((a) => a.available).sort()).toEqual([487, 500])
    // One transfer of the price per paid x402 result, and none more.
    expect(paidTransfers.length).toBe(payments.length)
    expect(new Set(paidTransfers.map((t) => t.transactionHash)).size).toBe(payments.length)
    expect(paidTransfers.every((t) => t.value === PRICE)).toBe(true)
  }, 240_000)

  it("cut just after it recorded an analysis's attempt (the answer lost): the caller's 503 carries the request, and its retry is served within seconds of the return", async () => {
    const { proxy, stripe } = world
    const creditKey = await boughtKey(server.url, stripe)
    const auth = { authorization: `Bearer ${creditKey}` }
    // Fresh connections, on which the statement that records an attempt is sent with its text.
    proxy.cut()
    const tally = new Tally()
    const outcomes: Array<{ status: number | undefined; body: unknown; convergedMs: number }> = []
    for (let round = 0; round < 3; round++) {
      const key = `claim-cut-${round}-${randomUUID()}`
      const analyze = (t: Tally) => call(t, "analyze credit", `${server.url}/v1/analyze`, { headers: { ...auth, "idempotency-key": key }, body: body(), deadlineMs: DEADLINE_MS })
      const cut = proxy.cutAfter("INSERT INTO analysis_requests")
      const first = analyze(tally)
      await cut
      await sleep(1_000 + Math.random() * 1_000)
      proxy.pass()
      const back = Date.now()
      const answered = await first
      expect(answered?.status, JSON.stringify(answered?.body)).toBe(503)
      // The database recorded the attempt: the answer names it (SPEC §7).
      expect(answered?.body).toMatchObject({ error: { code: "storage_unavailable", request_id: expect.any(String) } })
      let retried = await analyze(tally)
      while ((retried?.status === 409 || retried?.status === 503) && Date.now() - back < LEASE_MS + 15_000) {
        await sleep(1_000)
        retried = await analyze(tally)
      }
      outcomes.push({ status: retried?.status, body: retried?.body, convergedMs: Date.now() - back })
    }
    console.log(`[faults] attempt recorded, answer cut: ${JSON.stringify(outcomes.map((o) => ({ status: o.status, convergedMs: o.convergedMs })))}`)
    for (const outcome of outcomes) {
      expect(outcome.status, JSON.stringify(outcome.body)).toBe(200)
      expect(outcome.convergedMs).toBeLessThan(10_000)
    }
  }, 300_000)

  it("stalled for 36 s (connections open, nothing moves): every request is answered within 18 s (an analysis 33 s), then served again at once", async () => {
    const { proxy, stripe } = world
    const key = await boughtKey(server.url, stripe)
    const auth = { authorization: `Bearer ${key}` }
    const keys = Array.from({ length: 6 }, (_, i) => `credit-stall-${i}-${randomUUID()}`)
    const tally = new Tally()
    // Ten seconds of silence drop a connection, five more may go to a new one: long before the stall ends. An
    // analysis may meet it at several steps (its claim, its settlement, giving its credit back): up to 30 s after its own deadline.
    const deadlineMs = 18_000
    const analysisDeadlineMs = 3_000 + 30_000
    const inFlight: Array<Promise<unknown>> = []
    const load = (i: number) => {
      inFlight.push(
        call(tally, "analyze credit", `${server.url}/v1/analyze`, { headers: { ...auth, "idempotency-key": keys[i]! }, body: body(), deadlineMs: analysisDeadlineMs })
      )
      inFlight.push(call(tally, "balance", `${server.url}/v1/credits/balance`, { headers: auth, deadlineMs }))
      inFlight.push(call(tally, "checkout-status", `${server.url}/v1/credits/checkout-status`, { headers: auth, body: { order_id: randomUUID() }, deadlineMs }))
    }
    load(0)
    await sleep(50)
    proxy.stall()
    const stalledAt = Date.now()
    for (let i = 1; i < keys.length; i++) {
      load(i)
      await sleep(2_000)
    }
    await sleep(Math.max(0, 36_000 - (Date.now() - stalledAt)))
    proxy.pass()
    const back = Date.now()
    await Promise.all(inFlight)
    const servedAgainMs = await servesAgainAfter(key, back)
    const after = await ledger(world.directUrl)
    console.log(`[faults] postgres stall: ${JSON.stringify({ requests: tally.summary(), stallMs: back - stalledAt, servedAgainMs, proxy: proxy.stats() })}`)
    expect(tally.hung, tally.summary()).toEqual([])
    expect(tally.unreachable, tally.summary()).toEqual([])
    // 404: the order asked about does not exist, an answer that needs the database.
    // An analysis whose 3 s deadline passes while it waits on the stalled database is 504 analysis_timeout (SPEC:
    // nothing consumed; every account below still equals its entries); any other status outside the promise fails.
    expect(tally.broken([404, 409]).filter((a) => !(a.what === "analyze credit" && a.status === 504 && a.code === "analysis_timeout")), tally.summary()).toEqual([])
    expect(servedAgainMs).toBeLessThan(5_000)
    for (const a of after) {
      expect(a.available).toBe(a.entriesAvailable)
      expect(a.reserved).toBe(a.entriesReserved)
    }
  }, 120_000)

  it("a pool exhausted by slow statements (each packet held 400 ms): 60 requests at once are all answered, 200 or 503", async () => {
    const { proxy, stripe } = world
    const key = await boughtKey(server.url, stripe)
    const auth = { authorization: `Bearer ${key}` }
    const tally = new Tally()
    proxy.delay(400)
    const started = Date.now()
    await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        i % 3 === 0
          ? call(tally, "checkout-status", `${server.url}/v1/credits/checkout-status`, { headers: auth, body: { order_id: randomUUID() }, deadlineMs: 30_000 })
          : call(tally, "balance", `${server.url}/v1/credits/balance`, { headers: auth, deadlineMs: 30_000 })
      )
    )
    const tookMs = Date.now() - started
    proxy.delay(0)
    const servedAgainMs = await servesAgainAfter(key, Date.now())
    console.log(`[faults] postgres slow pool: ${JSON.stringify({ requests: tally.summary(), tookMs, servedAgainMs })}`)
    expect(tally.hung, tally.summary()).toEqual([])
    expect(tally.unreachable, tally.summary()).toEqual([])
    expect(tally.broken([404]), tally.summary()).toEqual([])
    // Some got through the slow pool; the ones that waited past the pool's limit were told to retry.
    expect(tally.answers.filter((a) => a.status === 200 || a.status === 404).length).toBeGreaterThan(0)
  }, 120_000)

  it("unreachable at start (refused, then stalled): one line naming DATABASE_URL and exit 1 within seconds; starts once reachable", async () => {
    const { proxy } = world
    for (const fault of ["refuse", "stall"] as const) {
      proxy[fault]()
      const started = Date.now()
      const failure = await world.start().then(
        (s) => `started anyway: ${s.url}`,
        (e: unknown) => String(e)
      )
      const tookMs = Date.now() - started
      proxy.pass()
      console.log(`[faults] postgres ${fault} at start: exit after ${tookMs} ms: ${/morsel: .*/.exec(failure)?.[0]}`)
      expect(failure).toMatch(/server exited with 1: [\s\S]*morsel: the database is unavailable \(check DATABASE_URL or MORSEL_DATA_DIR\)/)
      expect(tookMs).toBeLessThan(30_000)
    }
    const second = await world.start()
    expect((await fetch(`${second.url}/health`)).status).toBe(200)
    await second.stop()
  }, 120_000)
})
