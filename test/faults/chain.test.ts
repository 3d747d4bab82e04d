// The chain misbehaves under the built service: RPC down, answering errors, slower than X402_CONFIRM_TIMEOUT_MS, a broadcast transaction dropped; one transfer per paid result.
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { keccak256, type Hex } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { realPostgresUrl } from "../support/database.ts"
import { Reply } from "../support/fakeOpenAI.ts"
import { isRecord } from "../support/http.ts"
import { chickenRice } from "../support/meals.ts"
import type { Served } from "../support/process.ts"
import { buildOnce, call, PRICE, paymentFor, query, sleep, startWorld, Tally, transfersTo, type World } from "./world.ts"

if (!realPostgresUrl) console.warn("test/faults: skipped (set TEST_DATABASE_URL to a real PostgreSQL server to inject its faults)")

describe.skipIf(!realPostgresUrl)("chain faults under the built service", () => {
  let world: World
  let server: Served

  beforeAll(async () => {
    await buildOnce()
    world = await startWorld({ payers: 2 })
    // The model takes a moment, so a fault can be switched on between the payment's verification and its settlement.
    world.model.setFallback(Reply.answer(chickenRice, { delayMs: 600 }))
    server = await world.start()
  }, 240_000)
  afterAll(async () => {
    await world?.close()
  })

  it("RPC down, erroring, slow and a dropped transaction: payment_pending or 503 in time, the reconciler finishes, one transfer per paid result", async () => {
    const { chain, rpc, model } = world
    const body = { image_base64: world.photo.base64, mime_type: world.photo.mime }
    const payers = chain.accounts.payers
    const tally = new Tally()
    const analyze = (p: { signature: string; key: string }, what: string) =>
      call(tally, what, `${server.url}/v1/analyze`, { headers: { "payment-signature": p.signature, "idempotency-key": p.key }, body, deadlineMs: 30_000 })
    const newPayment = async (i: number) => ({ signature: await paymentFor(server.url, payers[i % payers.length]!, body), key: `chain-fault-${i}-${randomUUID()}` })
    /** Switches `fault` on once the request's analysis is running: verified, not yet settled. */
    const duringSettlement = async (p: { signature: string; key: string }, what: string, fault: () => void | Promise<void>) => {
      const seen = model.requests.length
      const answer = analyze(p, what)
      await Effect.runPromise(model.awaitRequests(seen + 1))
      await fault()
      return answer
    }
    /** The identical retry, until it has a final answer. */
    const retryUntilFinal = async (p: { signature: string; key: string }, what: string) => {
      for (let i = 0; i < 40; i++) {
        const answer = await analyze(p, what)
        if (answer !== undefined && answer.status !== 503) return answer
        await sleep(500)
      }
      return analyze(p, what)
    }
    const before = (await transfersTo(chain, payers.map((p) => p.address))).length
    const outcomes: Record<string, string> = {}

    // 1. RPC down before anything is verified: nothing can be checked, nothing is charged; the retry pays once.
    const a = await newPayment(0)
    rpc.set({ kind: "down" })
    const down = await analyze(a, "rpc down")
    rpc.set({ kind: "pass" })
    outcomes["rpc down"] = `${down?.status} ${down?.code}`
    expect(down?.status).toBe(503)
    expect(down?.retryAfter).toMatch(/^\d+$/)
    expect((await retryUntilFinal(a, "retry after rpc down"))?.status).toBe(200)

    // 2. RPC answering 503 while the payment is settled.
    const b = await newPayment(1)
    const erroring = await duringSettlement(b, "rpc errors", () => rpc.set({ kind: "error" }))
    await sleep(200)
    rpc.set({ kind: "pass" })
    outcomes["rpc errors"] = `${erroring?.status} ${erroring?.code}`
    expect([200, 503]).toContain(erroring?.status)
    if (erroring?.status === 503) expect(erroring.retryAfter).toMatch(/^\d+$/)
    expect((await retryUntilFinal(b, "retry after rpc errors"))?.status).toBe(200)

    // 3. RPC slower than X402_CONFIRM_TIMEOUT_MS (1 s): payment_pending, Retry-After 60; the background reconciler
    //    settles it without any retry, and the retry then replays the result with its receipt.
    const c = await newPayment(0)
    const slow = await duringSettlement(c, "rpc slow", () => rpc.set({ kind: "slow", ms: 1_500 }))
    rpc.set({ kind: "pass" })
    outcomes["rpc slow"] = `${slow?.status} ${slow?.code}`
    expect(slow?.status).toBe(503)
    expect(slow?.code).toBe("payment_pending")
    expect(slow?.retryAfter).toBe("60")
    const error = isRecord(slow?.body) && isRecord(slow.body["error"]) ? slow.body["error"] : {}
    const requestId = String(error["request_id"])
    const reconciledAt = Date.now()
    let status: string | undefined
    while (status !== "paid" && Date.now() - reconciledAt < 45_000) {
      status = (await query<{ status: string }>(world.directUrl, "SELECT status FROM analysis_requests WHERE request_id = $1", [requestId]))[0]?.status
      if (status !== "paid") await sleep(500)
    }
    outcomes["reconciler finished after"] = `${Date.now() - reconciledAt} ms`
    expect(status, "the reconciler settled the pending payment with nobody retrying").toBe("paid")
    const replay = await analyze(c, "retry after reconciliation")
    expect(replay?.status).toBe(200)
    expect(replay?.headers.get("payment-response")).toBeTruthy()

    // 4. A broadcast transaction dropped from the mempool while still valid: rebroadcast, paid once.
    const d = await newPayment(1)
    await chain.pauseMining()
    const sentBefore = rpc.sent.length
    const pending = await analyze(d, "dropped, still valid")
    outcomes["dropped"] = `${pending?.status} ${pending?.code}`
    expect(pending?.status).toBe(503)
    expect(pending?.code).toBe("payment_pending")
    for (const raw of rpc.sent.slice(sentBefore)) await chain.dropTransaction(keccak256(raw as Hex))
    await chain.resumeMining()
    expect((await retryUntilFinal(d, "retry after drop"))?.status).toBe(200)

    // 5. Dropped, and the authorization expires before anyone resends it: 402, nothing charged, no transfer.
    const e = await newPayment(0)
    await chain.pauseMining()
    const sentBeforeExpiry = rpc.sent.length
    const expiring = await analyze(e, "dropped, then expired")
    expect(expiring?.code).toBe("payment_pending")
    for (const raw of rpc.sent.slice(sentBeforeExpiry)) await chain.dropTransaction(keccak256(raw as Hex))
    // Past validBefore (600 s of maxTimeoutSeconds and the margin).
    await chain.advanceTime(3_600)
    await chain.resumeMining()
    const lost = await retryUntilFinal(e, "retry after expiry")
    outcomes["dropped and expired"] = `${lost?.status} ${lost?.code}`
    expect(lost?.status).toBe(402)
    expect(lost?.headers.get("payment-required")).toBeTruthy()

    const transfers = await transfersTo(chain, payers.map((p) => p.address))
    const paid = await query<{ n: string }>(world.directUrl, "SELECT COUNT(*) AS n FROM analysis_requests WHERE funding = 'x402' AND status = 'paid'")
    console.log(
      `[faults] chain: ${JSON.stringify({
        requests: tally.summary(),
        outcomes,
        transfers: { before, after: transfers.length },
        rpcCalls: { sendRawTransaction: rpc.calls("eth_sendRawTransaction"), getTransactionReceipt: rpc.calls("eth_getTransactionReceipt") }
      })}`
    )
    expect(tally.hung).toEqual([])
    expect(tally.broken([402]), tally.summary()).toEqual([])
    // Four paid results (a to d), four transfers of the price, each its own transaction; the expired one paid nothing.
    expect(Number(paid[0]?.n)).toBe(4)
    expect(transfers.length - before).toBe(4)
    expect(new Set(transfers.map((t) => t.transactionHash)).size).toBe(transfers.length)
    expect(transfers.every((t) => t.value === PRICE)).toBe(true)
  }, 240_000)
})
