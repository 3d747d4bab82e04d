// The card processor misbehaves under the built service: 5xx and lost answers at checkout, confirm, checkout-status and the listing; late webhooks, duplicated and out of order.
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newCreditKey } from "../../src/credits/keys.ts"
import { realPostgresUrl } from "../support/database.ts"
import type { WebhookDelivery } from "../support/fakeStripe.ts"
import { isRecord } from "../support/http.ts"
import type { Served } from "../support/process.ts"
import { buildOnce, call, ledger, startWorld, Tally, type World } from "./world.ts"

if (!realPostgresUrl) console.warn("test/faults: skipped (set TEST_DATABASE_URL to a real PostgreSQL server to inject its faults)")

describe.skipIf(!realPostgresUrl)("card processor faults under the built service", () => {
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

  it("5xx and lost answers: 503 processor_unavailable with Retry-After, the order stays recoverable, late webhooks grant once", async () => {
    const { stripe } = world
    const key = newCreditKey(true)
    const auth = { authorization: `Bearer ${key}` }
    const tally = new Tally()
    const post = (what: string, path: string, body: unknown) => call(tally, what, `${server.url}${path}`, { headers: auth, body, deadlineMs: 30_000 })
    const checkout = (orderId: string) => post("checkout", "/v1/credits/checkout", { order_id: orderId })
    const status = (orderId: string) => post("checkout-status", "/v1/credits/checkout-status", { order_id: orderId })
    const confirm = (sessionId: string) => post("confirm", "/v1/credits/confirm", { session_id: sessionId })
    const deliveries: Array<WebhookDelivery> = []
    const webhook = async (event: Parameters<typeof stripe.sendWebhook>[1]) => {
      const delivery = await stripe.sendWebhook(`${server.url}/webhooks/stripe`, event)
      deliveries.push(delivery)
      return delivery
    }
    const unavailable = (answer: Awaited<ReturnType<typeof call>>) => {
      expect(answer?.status, JSON.stringify(answer?.body)).toBe(503)
      expect(answer?.code).toBe("processor_unavailable")
      expect(answer?.retryAfter).toMatch(/^\d+$/)
    }
    const callsBefore = { ...stripe.calls }

    // Checkout while the processor answers 500: refused in words, nothing half-made that a retry cannot finish.
    const first = randomUUID()
    stripe.failNext(100)
    unavailable(await checkout(first))
    // Now the processor creates the session, but its answers are lost on the way back (also on stripe-node's retries).
    stripe.failNext(0)
    stripe.loseAnswersOfNext(3)
    unavailable(await checkout(first))
    // The order has no saved session: while the listing fails, checkout-status says 503, never a local verdict.
    stripe.failNext(100)
    unavailable(await status(first))
    stripe.failNext(0)
    const found = await status(first)
    expect(found?.status).toBe(200)
    expect(found?.body).toMatchObject({ order_id: first, state: "open", credits_remaining: 0 })
    // The pending order is not replaced by a new one; retrying it gives back the one session the processor made.
    const replacement = await checkout(randomUUID())
    expect(replacement?.status).toBe(409)
    const retried = await checkout(first)
    expect(retried?.status).toBe(200)
    const sessionId = isRecord(retried?.body) ? String(retried.body["session_id"]) : ""
    expect(stripe.sessions.size, "one session for the order, however many attempts").toBe(1)

    // The cardholder pays; confirm and checkout-status meet 500s, then the processor comes back.
    stripe.pay(sessionId)
    stripe.failNext(100)
    unavailable(await confirm(sessionId))
    unavailable(await status(first))
    stripe.failNext(0)
    // The webhooks arrive late, three times, at once, with a confirm among them: 500 credits, once.
    const [w1, w2, c1, w3] = await Promise.all([
      webhook(stripe.events.completed(sessionId)),
      webhook(stripe.events.completed(sessionId)),
      confirm(sessionId),
      webhook(stripe.events.completed(sessionId))
    ])
    expect([w1.status, w2.status, w3.status, c1?.status]).toEqual([200, 200, 200, 200])
    expect((await status(first))?.body).toMatchObject({ state: "paid", credits_remaining: 500 })

    // A second pack paid by a delayed method; its events come out of order and repeated, one lost answer among them.
    const second = randomUUID()
    const again = await checkout(second)
    const secondSession = isRecord(again?.body) ? String(again.body["session_id"]) : ""
    stripe.payAsync(secondSession)
    const completedUnpaid = stripe.events.completed(secondSession)
    stripe.asyncSucceeds(secondSession)
    const succeeded = stripe.events.asyncSucceeded(secondSession)
    stripe.loseAnswersOfNext(1)
    const outOfOrder = [await webhook(succeeded), await webhook(completedUnpaid), await webhook(succeeded), await webhook(completedUnpaid)]
    expect(outOfOrder.map((d) => d.status).every((s) => s === 200 || s === 503)).toBe(true)
    // The processor redelivers what was refused.
    for (let i = 0; i < 5 && deliveries.at(-1)?.status !== 200; i++) await webhook(succeeded)
    const balance = await call(tally, "balance", `${server.url}/v1/credits/balance`, { headers: auth })
    expect(balance?.body).toMatchObject({ credits_remaining: 1000 })

    const accounts = await ledger(world.directUrl)
    const calls = Object.fromEntries(Object.entries(stripe.calls).map(([k, v]) => [k, v - (callsBefore[k as keyof typeof callsBefore] ?? 0)]))
    console.log(
      `[faults] card processor: ${JSON.stringify({
        requests: tally.summary(),
        webhooks: deliveries.map((d) => d.status),
        processorCalls: calls,
        credits: { before: 0, after: accounts[0]?.available },
        grants: accounts[0]?.grants
      })}`
    )
    expect(tally.hung).toEqual([])
    expect(tally.broken([404, 409]), tally.summary()).toEqual([])
    expect(accounts).toHaveLength(1)
    expect(accounts[0]).toMatchObject({ grants: 2, available: 1000, entriesAvailable: 1000, reversals: 0 })
  }, 180_000)

  it("a processor that accepts calls and never answers: checkout answers 503 within 25 s, and the same order works once it answers", async () => {
    const { stripe } = world
    const key = newCreditKey(true)
    const auth = { authorization: `Bearer ${key}` }
    const tally = new Tally()
    const orderId = randomUUID()
    stripe.hangNext(3)
    const hung = await call(tally, "checkout", `${server.url}/v1/credits/checkout`, { headers: auth, body: { order_id: orderId }, deadlineMs: 25_000 })
    const again = await call(tally, "checkout", `${server.url}/v1/credits/checkout`, { headers: auth, body: { order_id: orderId }, deadlineMs: 25_000 })
    console.log(`[faults] card processor silent: ${tally.summary()}`)
    expect(tally.hung).toEqual([])
    expect(hung?.status).toBe(503)
    expect(hung?.code).toBe("processor_unavailable")
    expect(hung?.retryAfter).toMatch(/^\d+$/)
    expect(again?.status).toBe(200)
    expect(again?.body).toMatchObject({ order_id: orderId })
  }, 120_000)
})
