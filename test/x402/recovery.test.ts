import { randomUUID } from "node:crypto"
import { decodePaymentResponseHeader } from "@x402/core/http"
import type { PaymentPayload } from "@x402/core/types"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Ref } from "effect"
import { type Address, createWalletClient, http } from "viem"
import type { RequestId } from "../../src/domain/ids.ts"
import { paymentChain } from "../../src/x402/EvmChain.ts"
import { decodePayment } from "../../src/x402/protocol.ts"
import { PaymentResolutions, type ReconcilePass, X402Reconciler } from "../../src/x402/Reconciler.ts"
import { X402Funding, X402Layer } from "../../src/x402/X402Funding.ts"
import { Chain } from "../support/chain.ts"
import { decodeChallengeHeader, refusal, X402Test } from "./layer.ts"
import { authorizationOf, header } from "../support/x402.ts"
import { type RpcProxy, startRpcProxy } from "./rpcProxy.ts"
import { transferCalldata } from "../../src/x402/Settlement.ts"
import { chainDo, payerAddress, reserveAndCommit, retry, signed, transfersFrom } from "./chainSteps.ts"
import { newRequestId, paymentCredential, unsaved } from "../support/funding.ts"

const PRICE = 10_000n


const authorizationUsed = (payload: PaymentPayload) =>
  Effect.flatMap(Chain, (chain) => {
    const { from, nonce } = authorizationOf(payload)
    return Effect.promise(() => chain.authorizationUsed(from, nonce))
  })

const receiptOf = (paymentResponse: Option.Option<string>) => decodePaymentResponseHeader(Option.getOrThrow(paymentResponse))

/** The analysis request in `status`, as the pipeline records it (payment_pending: its result saved before committing). */
const analysisRequest = (requestId: RequestId, payer: Address, status: "running" | "payment_pending") =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const at = new Date()
    return sql`
      INSERT INTO analysis_requests (request_id, payer, idempotency_key, input_fingerprint, funding, status, lease_until, created_at)
      VALUES (${requestId}, ${`wallet:${payer.toLowerCase()}`}, ${randomUUID()}, 'fingerprint', 'x402', ${status}, ${at}, ${at})`
  }).pipe(Effect.orDie)

const awaitingPayment = (requestId: RequestId, payer: Address) => analysisRequest(requestId, payer, "payment_pending")

/** The attempt failed and its request says so, but giving back its claim failed (storage trouble, a crash). */
const failedWithoutRelease = (payload: PaymentPayload, requestId: RequestId, payer: Address) =>
  Effect.gen(function* () {
    yield* analysisRequest(requestId, payer, "running")
    yield* Effect.flatMap(X402Funding, (x402) => Effect.flatMap(x402.identify(paymentCredential(header(payload))), (m) => m.reserve(requestId)))
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE analysis_requests SET status = 'failed', failure_code = 'analysis_failed', completed_at = now() WHERE request_id = ${requestId}`.pipe(
      Effect.orDie
    )
  })

/** The pipeline marks the request paid once its payment settled. */
const completed = (requestId: RequestId) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE analysis_requests SET status = 'paid', completed_at = now() WHERE request_id = ${requestId}`).pipe(
    Effect.orDie
  )

const requestStatus = (requestId: RequestId) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ status: string }>`SELECT status FROM analysis_requests WHERE request_id = ${requestId}`).pipe(
    Effect.map((rows) => rows[0]?.status),
    Effect.orDie
  )

const claimOf = (requestId: RequestId) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ state: string }>`SELECT state FROM x402_payments WHERE request_id = ${requestId}`).pipe(
    Effect.map((rows) => rows[0]?.state),
    Effect.orDie
  )

/** The instance claimed the authorization and saved the result, then vanished before submitting the payment. */
const claimedThenCrashed = (payload: PaymentPayload, requestId: RequestId, payer: Address) =>
  Effect.gen(function* () {
    const x402 = yield* X402Funding
    const method = yield* x402.identify(paymentCredential(header(payload)))
    yield* method.reserve(requestId)
    yield* awaitingPayment(requestId, payer)
  })


const resolved = Ref.unsafeMake<ReadonlyArray<string>>([])
/** Records each resolution and updates the request as the server does. */
const Resolutions = Layer.effect(
  PaymentResolutions,
  Effect.map(SqlClient.SqlClient, (sql) => ({
    settled: (requestId: RequestId, paymentResponse: string) =>
      Ref.update(resolved, (all) => [...all, `settled:${requestId}`]).pipe(
        Effect.zipRight(sql`
          UPDATE analysis_requests SET status = 'paid', payment_response = ${paymentResponse}, completed_at = now()
          WHERE request_id = ${requestId} AND status = 'payment_pending'`),
        Effect.orDie
      ),
    failed: (requestId: RequestId) =>
      Ref.update(resolved, (all) => [...all, `failed:${requestId}`]).pipe(
        Effect.zipRight(sql`
          UPDATE analysis_requests SET status = 'failed', failure_code = 'payment_failed', completed_at = now()
          WHERE request_id = ${requestId} AND status = 'payment_pending'`),
        Effect.orDie
      )
  }))
)

// Passes run only when a test asks; every payment is due at once.
const manual = { interval: "1 hour", minAge: "0 millis" } as const

describe("x402 payments left pending are recovered", () => {
  layer(X402Test({ reconciler: manual, resolutions: Resolutions, payers: 9 }), { excludeTestServices: true })("recovery", (it) => {
    it.effect("a payment claimed but never submitted (crash, or chain down at submission) is submitted by the reconciler", () =>
      Effect.gen(function* () {
        const reconciler = yield* X402Reconciler
        const payer = yield* payerAddress(0)
        const payload = yield* signed(0)
        const requestId = newRequestId()
        yield* claimedThenCrashed(payload, requestId, payer)
        // The first pass submits it, a later one finds it mined.
        const submitted = yield* reconciler.runOnce
        expect(submitted).toMatchObject({ examined: 1, failed: [] })
        const pass = submitted.settled.length > 0 ? submitted : yield* reconciler.runOnce
        expect(pass.settled.map((s) => s.requestId)).toEqual([requestId])
        expect(yield* Ref.get(resolved)).toContain(`settled:${requestId}`)
        const transfers = yield* transfersFrom(payer)
        expect(transfers).toEqual([{ transactionHash: receiptOf(Option.some(pass.settled[0]!.paymentResponse)).transaction, value: PRICE }])
        // The client's late retry gets the same receipt; nothing moves again.
        const late = yield* retry(payload, requestId)
        expect(late.paymentResponse).toEqual(Option.some(pass.settled[0]!.paymentResponse))
        expect(yield* transfersFrom(payer)).toHaveLength(1)
      }))

    it.effect("a retry carrying another authorization of the same wallet settles the recorded one, from its stored signature", () =>
      Effect.gen(function* () {
        const payer = yield* payerAddress(1)
        const recorded = yield* signed(1)
        const requestId = newRequestId()
        yield* claimedThenCrashed(recorded, requestId, payer)
        const another = yield* signed(1)
        const settled = yield* retry(another, requestId)
        yield* completed(requestId)
        expect(receiptOf(settled.paymentResponse)).toMatchObject({ success: true })
        expect(yield* authorizationUsed(recorded)).toBe(true)
        expect(yield* authorizationUsed(another)).toBe(false)
        expect(yield* transfersFrom(payer)).toHaveLength(1)
      }))

    it.effect("two instances' reconcilers never work the same payment at once", () =>
      Effect.gen(function* () {
        const mine = yield* X402Reconciler
        // A second instance: its own x402 services and reconciler on the same database and chain.
        const theirs = Context.get(yield* Layer.build(Layer.fresh(X402Layer(manual))), X402Reconciler)
        const payers = [2, 3, 4]
        yield* chainDo((c) => c.pauseMining())
        const requestIds = yield* Effect.forEach(
          payers,
          (i) =>
            Effect.gen(function* () {
              const requestId = newRequestId()
              const pending = yield* Effect.flip(reserveAndCommit(yield* signed(i), requestId))
              expect(pending).toMatchObject({ error: { code: "payment_pending" } })
              return requestId
            }),
          { concurrency: "unbounded" }
        )
        const passes: ReadonlyArray<ReconcilePass> = yield* Effect.all([mine.runOnce, theirs.runOnce, mine.runOnce, theirs.runOnce], {
          concurrency: "unbounded"
        })
        expect(passes.reduce((n, p) => n + p.examined, 0)).toBe(requestIds.length)
        yield* chainDo((c) => c.resumeMining())
        const settled = yield* Effect.all([mine.runOnce, theirs.runOnce], { concurrency: "unbounded" })
        expect(settled.flatMap((p) => p.settled.map((s) => s.requestId)).sort()).toEqual([...requestIds].sort())
        for (const i of payers) expect(yield* transfersFrom(yield* payerAddress(i))).toHaveLength(1)
      }).pipe(Effect.scoped))

    it.effect("a claim whose release failed does not block the retry: the same authorization pays the new attempt, once", () =>
      Effect.gen(function* () {
        const payer = yield* payerAddress(6)
        const payload = yield* signed(6)
        yield* failedWithoutRelease(payload, newRequestId(), payer)
        // The client retries (a failed attempt frees its Idempotency-Key: the retry is a new request).
        const settled = yield* reserveAndCommit(payload, newRequestId())
        const transfers = yield* transfersFrom(payer)
        expect(transfers).toEqual([{ transactionHash: receiptOf(settled.paymentResponse).transaction, value: PRICE }])
      }))

    it.effect("the reconciler releases claims of failed attempts nobody retries", () =>
      Effect.gen(function* () {
        const reconciler = yield* X402Reconciler
        const requestId = newRequestId()
        yield* failedWithoutRelease(yield* signed(7), requestId, yield* payerAddress(7))
        expect(yield* claimOf(requestId)).toBe("claimed")
        const pass = yield* reconciler.runOnce
        expect(pass.examined).toBe(0)
        expect(yield* claimOf(requestId)).toBeUndefined()
        expect(yield* transfersFrom(yield* payerAddress(7))).toEqual([])
      }))

    it.effect("a payment settled while its request stayed payment_pending (crash between the two writes) completes the request", () =>
      Effect.gen(function* () {
        const reconciler = yield* X402Reconciler
        const payer = yield* payerAddress(8)
        const payload = yield* signed(8)
        const requestId = newRequestId()
        // Settled on chain and in the payment record; the instance died before it marked the request paid.
        yield* awaitingPayment(requestId, payer)
        const settled = yield* reserveAndCommit(payload, requestId)
        expect(yield* requestStatus(requestId)).toBe("payment_pending")
        const pass = yield* reconciler.runOnce
        expect(pass.settled).toEqual([{ requestId, paymentResponse: Option.getOrThrow(settled.paymentResponse) }])
        expect(yield* requestStatus(requestId)).toBe("paid")
        // Done: the next pass leaves it alone, and nothing moved twice.
        expect((yield* reconciler.runOnce).examined).toBe(0)
        expect(yield* transfersFrom(payer)).toHaveLength(1)
      }))

    // Last: it moves the chain's clock an hour ahead.
    it.effect("a claimed payment whose authorization expired unsent is failed by the reconciler: nothing moves, the retry is a 402", () =>
      Effect.gen(function* () {
        const reconciler = yield* X402Reconciler
        const payer = yield* payerAddress(5)
        const payload = yield* signed(5)
        const requestId = newRequestId()
        yield* claimedThenCrashed(payload, requestId, payer)
        yield* chainDo((c) => c.advanceTime(3600))
        yield* chainDo((c) => c.mine())
        const pass = yield* reconciler.runOnce
        expect(pass.failed.map((f) => f.requestId)).toEqual([requestId])
        expect(yield* Ref.get(resolved)).toContain(`failed:${requestId}`)
        expect(yield* transfersFrom(payer)).toEqual([])
        expect(yield* Effect.flip(retry(payload, requestId))).toMatchObject({ _tag: "PaymentRequired", error: { code: "invalid_payment" } })
        // Its request failed with the payment, so the client's identical retry is a new attempt with the same
        // authorization: a 402 with a fresh challenge (nothing was charged), not a reuse conflict.
        expect(yield* requestStatus(requestId)).toBe("failed")
        const { error, headers } = yield* refusal(reserveAndCommit(payload, newRequestId()))
        expect(error).toMatchObject({ _tag: "PaymentRequired", error: { code: "invalid_payment" }, payment_required: { x402Version: 2 } })
        expect((error as { error: { message: string } }).error.message).toMatch(/could not be settled: .*expired.*nothing was charged/)
        // The fresh challenge of the body is the one in PAYMENT-REQUIRED.
        expect(decodeChallengeHeader(headers)).toEqual((error as { payment_required: unknown }).payment_required)
        expect(yield* transfersFrom(payer)).toEqual([])
      }))
  })

  // The server's RPC goes through a counting proxy, so a test sees how far back it searches the chain's logs.
  let rpcOfLayer: RpcProxy | undefined
  const getLogsCalls = Effect.sync(() => rpcOfLayer?.calls("eth_getLogs") ?? 0)

  layer(
    X402Test({
      env: (chain) =>
        Effect.map(startRpcProxy(chain.rpcUrl), (proxy) => {
          rpcOfLayer = proxy
          return { X402_RPC_URL: proxy.url }
        })
    }),
    { excludeTestServices: true }
  )("a long chain", (it) => {
    it.effect("a payer who spends the authorization themselves after the claim is served; the search for it starts at the claim, not at genesis", () =>
      Effect.gen(function* () {
        const chain = yield* Chain
        // Tens of thousands of blocks before the claim, as on Base: a search from genesis would take several log windows.
        yield* Effect.promise(() =>
          fetch(chain.rpcUrl, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "hardhat_mine", params: ["0x7530", "0x0"] })
          })
        )
        const payer = yield* payerAddress(0)
        const payload = yield* signed(0)
        const x402 = yield* X402Funding
        const reservation = yield* Effect.flatMap(x402.identify(paymentCredential(header(payload))), (m) => m.reserve(newRequestId()))
        // The payer front-runs the settlement with the same authorization (any account may submit it).
        const { authorization, signature } = Option.getOrThrow(Option.getRight(decodePayment(header(payload))))
        const sender = createWalletClient({ account: chain.accounts.deployer, chain: paymentChain(chain.rpcUrl), transport: http(chain.rpcUrl) })
        const own = yield* Effect.promise(() => sender.sendTransaction({ to: chain.token, data: transferCalldata(authorization, signature) }))
        yield* Effect.promise(() => chain.publicClient.waitForTransactionReceipt({ hash: own }))
        const before = yield* getLogsCalls
        // It still pays us: the analysis is served with a receipt naming the payer's own transaction.
        const settled = yield* reservation.settle(unsaved)
        expect(receiptOf(settled.paymentResponse)).toMatchObject({ success: true, transaction: own })
        expect(yield* transfersFrom(payer)).toEqual([{ transactionHash: own, value: PRICE }])
        expect((yield* getLogsCalls) - before).toBeLessThanOrEqual(2)
      }))
  })
})
