// Random crash points: a seeded harness SIGKILLs the built service during a mixed paying workload, restarts it, lets retries run, and checks the money invariants after every run.
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newCreditKey } from "../../src/credits/keys.ts"
import { realPostgresUrl } from "../support/database.ts"
import { Reply } from "../support/fakeOpenAI.ts"
import { isRecord } from "../support/http.ts"
import { chickenRice, noFood } from "../support/meals.ts"
import { crash, freePort, type Served } from "../support/process.ts"
import { challengeOf, header, signPayment } from "../support/x402.ts"
import { seededRandom } from "../support/seeded.ts"
import { boughtKey, buildOnce, call, LEASE_MS, ledger, PRICE, query, sleep, startWorld, Tally, transfersTo, type World } from "./world.ts"

if (!realPostgresUrl) console.warn("test/faults: skipped (set TEST_DATABASE_URL to a real PostgreSQL server to inject its faults)")

/** FAULTS_SEED replays a run; FAULTS_CRASH_RUNS asks for more runs than CI's 20. */
const seed = Number(process.env["FAULTS_SEED"] ?? Math.floor(Math.random() * 2 ** 31))
const runs = Number(process.env["FAULTS_CRASH_RUNS"] ?? 20)


type Op =
  | { readonly kind: "credit"; readonly key: string; readonly idem: string; done: boolean; inProgress: boolean }
  | { readonly kind: "x402"; readonly signature: string; readonly idem: string; done: boolean; inProgress: boolean }
  | { readonly kind: "order"; readonly key: string; readonly sessionId: string; granted: boolean; confirmed: boolean; done: boolean; inProgress: false }

describe.skipIf(!realPostgresUrl)("random crash points", () => {
  let world: World
  let server: Served
  let port: number

  beforeAll(async () => {
    await buildOnce()
    world = await startWorld({ payers: 3 })
    port = await freePort()
    server = await world.start({}, port)
  }, 240_000)
  afterAll(async () => {
    await world?.close()
  })

  it(`${runs} runs of SIGKILL at a random moment of a mixed workload: every invariant holds after every run`, async () => {
    console.log(`[faults] crash harness: seed ${seed}, ${runs} runs (replay: FAULTS_SEED=${seed} FAULTS_CRASH_RUNS=${runs})`)
    const random = seededRandom(seed)
    const pick = <A>(xs: ReadonlyArray<A>) => xs[Math.floor(random() * xs.length)]!
    const { stripe, chain, model } = world
    const body = { image_base64: world.photo.base64, mime_type: world.photo.mime }
    const url = () => server.url
    const keys = [await boughtKey(url(), stripe), await boughtKey(url(), stripe)]
    const buyer = newCreditKey(true)
    const payers = chain.accounts.payers
    // Payments are signed ahead from one challenge: a crash must not stop a payer from retrying the very same one.
    const challengeAnswer = await fetch(`${url()}/v1/analyze`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": `challenge-${randomUUID()}` },
      body: JSON.stringify(body)
    })
    const challenge = challengeOf(challengeAnswer.headers.get("payment-required") ?? "")
    const sign = async () => header(await signPayment(pick(payers), challenge))

    const ops: Array<Op> = []
    const results = new Map<string, string>()
    const tally = new Tally()
    const kills: Array<number> = []
    const figures: Array<string> = []

    /** One step of an operation; marks it done once the service gave its final answer. */
    const step = async (op: Op, deadlineMs = 30_000) => {
      if (op.kind === "order") {
        const auth = { authorization: `Bearer ${op.key}` }
        if (!op.granted) {
          const delivery = await stripe.sendWebhook(`${url()}/webhooks/stripe`, stripe.events.completed(op.sessionId)).catch(() => undefined)
          if (delivery?.status === 200) op.granted = true
        }
        if (!op.confirmed) {
          const answer = await call(tally, "confirm", `${url()}/v1/credits/confirm`, { headers: auth, body: { session_id: op.sessionId }, deadlineMs })
          if (answer?.status === 200) op.confirmed = true
        }
        op.done = op.granted && op.confirmed
        return
      }
      const headers: Record<string, string> =
        op.kind === "credit"
          ? { authorization: `Bearer ${op.key}`, "idempotency-key": op.idem }
          : { "payment-signature": op.signature, "idempotency-key": op.idem }
      const answer = await call(tally, `analyze ${op.kind}`, `${url()}/v1/analyze`, { headers, body, deadlineMs })
      if (answer === undefined) return
      op.inProgress = answer.code === "in_progress"
      if (answer.status === 200) {
        const text = JSON.stringify(answer.body)
        const seen = results.get(op.idem)
        if (seen !== undefined && seen !== text) throw new Error(`Idempotency-Key ${op.idem} gave two different results:\n${seen}\n${text}`)
        results.set(op.idem, text)
        op.done = true
      }
      // A failed attempt is final for this harness (nothing charged); a retry would be a new attempt.
      if ([402, 422, 502, 504].includes(answer.status)) op.done = true
    }

    const newOps = async (): Promise<Array<Op>> => {
      const made: Array<Op> = []
      for (let i = 0; i < 3; i++) made.push({ kind: "credit", key: pick(keys), idem: `crash-credit-${randomUUID()}`, done: false, inProgress: false })
      for (let i = 0; i < 2; i++) made.push({ kind: "x402", signature: await sign(), idem: `crash-x402-${randomUUID()}`, done: false, inProgress: false })
      const lastOrder = ops.findLast((o) => o.kind === "order")
      // A key has one open order at a time: the next one once the last was granted.
      if (lastOrder === undefined || lastOrder.done) {
        const checkout = await call(tally, "checkout", `${url()}/v1/credits/checkout`, {
          headers: { authorization: `Bearer ${buyer}` },
          body: { order_id: randomUUID() }
        })
        const sessionId = isRecord(checkout?.body) ? checkout.body["session_id"] : undefined
        if (typeof sessionId === "string") {
          stripe.pay(sessionId)
          made.push({ kind: "order", key: buyer, sessionId, granted: false, confirmed: false, done: false, inProgress: false })
        }
      }
      return made
    }

    /** The model answers each analysis with a seeded outcome: mostly a meal after a while, sometimes no food or nonsense. */
    const scriptModel = (n: number) => {
      for (let i = 0; i < n; i++) {
        const r = random()
        model.enqueue(
          r < 0.7 ? Reply.answer(chickenRice, { delayMs: Math.floor(random() * 800) }) : r < 0.85 ? Reply.answer(noFood) : Reply.content("not json")
        )
      }
    }

    const checkInvariants = async (run: number, final: boolean) => {
      const accounts = await ledger(world.directUrl)
      for (const a of accounts) {
        expect(a.available, `run ${run}: available matches the ledger`).toBe(a.entriesAvailable)
        expect(a.reserved, `run ${run}: reserved matches the ledger`).toBe(a.entriesReserved)
        // Balance = grants − consumed − reversals + restorations, with what is held counted in.
        expect(a.available + a.reserved, `run ${run}: balance of ${a.fingerprint.slice(0, 8)}`).toBe(500 * (a.grants - a.reversals + a.restorations) - a.consumed)
      }
      // The sweeper closes an abandoned attempt, then returns its credit: a held credit of a closed attempt is a
      // defect only once that sweep had its moment (a crash between the two is finished by the sweep at start-up).
      const [credit] = await query<{ consumed_unpaid: string; paid_unconsumed: string; held_not_running: string }>(
        world.directUrl,
        `SELECT
           (SELECT COUNT(*) FROM credit_reservations r LEFT JOIN analysis_requests q ON q.request_id = r.request_id
             WHERE r.state = 'consumed' AND (q.status IS DISTINCT FROM 'paid')) AS consumed_unpaid,
           (SELECT COUNT(*) FROM analysis_requests q WHERE q.funding = 'credit' AND q.status = 'paid'
             AND (SELECT COUNT(*) FROM credit_reservations r WHERE r.request_id = q.request_id AND r.state = 'consumed') <> 1) AS paid_unconsumed,
           (SELECT COUNT(*) FROM credit_reservations r LEFT JOIN analysis_requests q ON q.request_id = r.request_id
             WHERE r.state = 'held' AND (q.status IS DISTINCT FROM 'running')
             AND COALESCE(q.completed_at, r.created_at) < now() - interval '5 seconds') AS held_not_running`
      )
      expect(credit, `run ${run}: each consumed credit is a paid result and each paid result consumed one`).toEqual({
        consumed_unpaid: "0",
        paid_unconsumed: "0",
        held_not_running: "0"
      })
      const [stale] = await query<{ n: string }>(
        world.directUrl,
        `SELECT COUNT(*) AS n FROM analysis_requests WHERE status = 'running' AND lease_until < now() - interval '5 seconds'`
      )
      expect(stale?.n, `run ${run}: no request stays running past its lease`).toBe("0")
      const payments = await query<{ request_id: string; state: string; tx_hash: string | null; status: string | null }>(
        world.directUrl,
        `SELECT p.request_id, p.state, p.tx_hash, q.status FROM x402_payments p LEFT JOIN analysis_requests q ON q.request_id = p.request_id`
      )
      const transfers = await transfersTo(chain, payers.map((p) => p.address))
      const onChain = new Set(transfers.map((t) => t.transactionHash.toLowerCase()))
      const settled = payments.filter((p) => p.state === "settled")
      const paidResults = payments.filter((p) => p.status === "paid")
      expect(transfers.every((t) => t.value === PRICE)).toBe(true)
      expect(onChain.size, `run ${run}: one transaction per transfer`).toBe(transfers.length)
      // Each paid x402 result has its transfer; a transfer without a paid result is only a payment still being reconciled.
      for (const p of paidResults) expect(p.state === "settled" && p.tx_hash !== null && onChain.has(p.tx_hash.toLowerCase())).toBe(true)
      expect(transfers.length, `run ${run}: transfers ≤ payments settled or on their way`).toBeLessThanOrEqual(
        payments.filter((p) => p.state === "settled" || p.state === "submitted").length
      )
      expect(settled.length).toBeGreaterThanOrEqual(paidResults.length)
      if (final) {
        expect(transfers.length, "finally: exactly one transfer per paid result").toBe(paidResults.length)
        expect(settled.length).toBe(paidResults.length)
      }
      // What a key holder sees is what the ledger says.
      for (const key of [...keys, buyer]) {
        const answer = await call(tally, "balance", `${url()}/v1/credits/balance`, { headers: { authorization: `Bearer ${key}` } })
        expect(answer?.status).toBe(200)
      }
      return { credits: accounts.reduce((n, a) => n + a.available, 0), consumed: accounts.reduce((n, a) => n + a.consumed, 0), transfers: transfers.length }
    }

    const started = Date.now()
    for (let run = 1; run <= runs; run++) {
      const runStarted = Date.now()
      const fresh = await newOps()
      ops.push(...fresh)
      scriptModel(fresh.length + 2)
      const open = ops.filter((o) => !o.done)
      const killAfter = 100 + Math.floor(random() * 1_400)
      const inFlight = open.map(async (op) => {
        await sleep(Math.floor(random() * 300))
        await step(op)
      })
      await sleep(killAfter)
      await crash(server)
      kills.push(killAfter)
      await Promise.all(inFlight)
      server = await world.start({}, port)
      // Retries: each open operation is asked again until it has its final answer; attempts the crash cut off stay
      // in_progress until their lease ends and are retried with the next runs' workloads.
      for (let round = 0; round < 3; round++) {
        const pending = ops.filter((o) => !o.done && !o.inProgress)
        if (pending.length === 0) break
        await Promise.all(pending.map((op) => step(op)))
        await sleep(300)
      }
      const state = await checkInvariants(run, false)
      figures.push(`run ${run} (${Date.now() - runStarted} ms): killed after ${killAfter} ms, ${ops.filter((o) => !o.done).length} open, ${JSON.stringify(state)}`)
    }
    // The end: every lease the crashes left runs out, the sweeper and the reconciler finish, every retry converges.
    const until = Date.now() + LEASE_MS + 20_000
    while (ops.some((o) => !o.done) && Date.now() < until) {
      await Promise.all(ops.filter((o) => !o.done).map((op) => step(op)))
      await sleep(2_000)
    }
    const final = await checkInvariants(runs + 1, true)
    for (const line of figures) console.log(`[faults] ${line}`)
    console.log(
      `[faults] crash harness: seed ${seed}, ${runs} runs in ${Date.now() - started} ms, ${ops.length} operations, ${tally.summary()}, ` +
        `final ${JSON.stringify(final)}, ${results.size} results`
    )
    expect(ops.filter((o) => !o.done).map((o) => o.kind), `seed ${seed}: operations that never converged`).toEqual([])
    expect(tally.hung, `seed ${seed}`).toEqual([])
    // The order of the buyer: each paid one granted 500 credits once.
    const orders = ops.filter((o) => o.kind === "order").length
    const buyerAnswer = await call(tally, "balance", `${url()}/v1/credits/balance`, { headers: { authorization: `Bearer ${buyer}` } })
    expect(buyerAnswer?.body).toMatchObject({ credits_remaining: 500 * orders })
  }, 900_000)
})
