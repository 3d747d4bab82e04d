import { decodePaymentResponseHeader } from "@x402/core/http"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option, PubSub, Queue, Ref } from "effect"
import { getAddress } from "viem"
import { PaymentResolutions, X402Reconciler } from "../../src/x402/Reconciler.ts"
import { X402Funding } from "../../src/x402/X402Funding.ts"
import { Chain } from "../support/chain.ts"
import { type FacilitatorMode, startFacilitator, type TestFacilitator } from "./facilitator.ts"
import { challenge, decodeChallengeHeader, refusal, X402Test } from "./layer.ts"
import { header, signPayment } from "../support/x402.ts"
import { balance, chainDo, payerAddress, reserveAndCommit, retry, signed, transfersFrom } from "./chainSteps.ts"
import { newRequestId, paymentCredential, unsaved } from "../support/funding.ts"

const PRICE = 10_000n



const receiptOf = (paymentResponse: Option.Option<string>) => decodePaymentResponseHeader(Option.getOrThrow(paymentResponse))

describe("x402 settlement on the local chain", () => {
  layer(X402Test(), { excludeTestServices: true })("self-settlement", (it) => {
    it.effect("settles once: balances move by exactly 10000 and the receipt names the mined transfer", () =>
      Effect.gen(function* () {
        const chain = yield* Chain
        const x402 = yield* X402Funding
        const payer = yield* payerAddress(0)
        const payTo = chain.accounts.payTo.address
        const before = { payer: yield* balance(payer), payTo: yield* balance(payTo) }
        const payload = yield* signed(0)
        const method = yield* x402.identify(paymentCredential(header(payload)))
        expect(method.payer).toEqual({ kind: "x402", id: `wallet:${payer.toLowerCase()}` })
        const reservation = yield* method.reserve(newRequestId())
        const settled = yield* reservation.settle(unsaved)
        const receipt = receiptOf(settled.paymentResponse)
        expect(receipt).toMatchObject({ success: true, network: "eip155:8453", payer: getAddress(payer) })
        const transfers = yield* transfersFrom(payer)
        expect(transfers).toEqual([{ transactionHash: receipt.transaction, value: PRICE }])
        expect(yield* balance(payer)).toBe(before.payer - PRICE)
        expect(yield* balance(payTo)).toBe(before.payTo + PRICE)
        // A replay commits again: the same receipt, nothing moves.
        const again = yield* reservation.settle(unsaved)
        expect(again.paymentResponse).toEqual(settled.paymentResponse)
        yield* reservation.release
        expect(yield* transfersFrom(payer)).toHaveLength(1)
      }))

    it.effect("a released reservation submits nothing, and the authorization may pay a later attempt", () =>
      Effect.gen(function* () {
        const x402 = yield* X402Funding
        const payer = yield* payerAddress(1)
        const payload = yield* signed(1)
        const method = yield* x402.identify(paymentCredential(header(payload)))
        const failedAttempt = yield* method.reserve(newRequestId())
        yield* failedAttempt.release
        yield* failedAttempt.release
        expect(yield* transfersFrom(payer)).toHaveLength(0)
        // Nothing was served for it, so the same authorization still pays the retry (a new attempt).
        const retryAttempt = yield* method.reserve(newRequestId())
        const settled = yield* retryAttempt.settle(unsaved)
        expect(yield* transfersFrom(payer)).toEqual([{ transactionHash: receiptOf(settled.paymentResponse).transaction, value: PRICE }])
      }))

    it.effect("an authorization already used for one request is refused for another (409 authorization_reused)", () =>
      Effect.gen(function* () {
        const x402 = yield* X402Funding
        const payer = yield* payerAddress(2)
        const payload = yield* signed(2)
        const method = yield* x402.identify(paymentCredential(header(payload)))
        const first = newRequestId()
        const held = yield* method.reserve(first)
        // While the first request holds it …
        const whileHeld = yield* Effect.flip(method.reserve(newRequestId()))
        expect(whileHeld).toMatchObject({ _tag: "Conflict", error: { code: "authorization_reused" } })
        yield* held.settle(unsaved)
        // … and after it paid.
        const afterPaid = yield* Effect.flip(method.reserve(newRequestId()))
        expect(afterPaid).toMatchObject({ _tag: "Conflict", error: { code: "authorization_reused" } })
        // The holder itself may reserve again (a retry of the same attempt).
        yield* method.reserve(first)
        expect(yield* transfersFrom(payer)).toHaveLength(1)
      }))

    it.effect("mining paused → 503 payment_pending with the pending receipt; mining resumed → the retry settles, one transfer", () =>
      Effect.gen(function* () {
        const payer = yield* payerAddress(3)
        const payload = yield* signed(3)
        const requestId = newRequestId()
        yield* chainDo((c) => c.pauseMining())
        const { error, headers } = yield* refusal(reserveAndCommit(payload, requestId))
        expect(error).toMatchObject({
          _tag: "ServiceUnavailable",
          error: { code: "payment_pending", request_id: requestId },
          payment_response: { success: false, errorReason: "settlement_pending", network: "eip155:8453", payer: getAddress(payer) }
        })
        expect(headers["retry-after"]).toBe("60")
        const pendingTx = (error as { payment_response: { transaction: string } }).payment_response.transaction
        expect(pendingTx).toMatch(/^0x[0-9a-f]{64}$/)
        expect(decodePaymentResponseHeader(headers["payment-response"]!)).toMatchObject({ errorReason: "settlement_pending", transaction: pendingTx })
        expect(yield* transfersFrom(payer)).toHaveLength(0)
        // Still unmined: the retry is pending again, with the same transaction.
        const stillPending = yield* Effect.flip(retry(payload, requestId))
        expect(stillPending).toMatchObject({ _tag: "ServiceUnavailable", error: { code: "payment_pending" }, payment_response: { transaction: pendingTx } })
        yield* chainDo((c) => c.resumeMining())
        const settled = yield* retry(payload, requestId)
        expect(receiptOf(settled.paymentResponse)).toMatchObject({ success: true, transaction: pendingTx })
        const replay = yield* retry(payload, requestId)
        expect(replay.paymentResponse).toEqual(settled.paymentResponse)
        expect(yield* transfersFrom(payer)).toEqual([{ transactionHash: pendingTx, value: PRICE }])
      }))

    it.effect("a pending transaction the node dropped is broadcast again by the retry; still one transfer", () =>
      Effect.gen(function* () {
        const payer = yield* payerAddress(0)
        const before = (yield* transfersFrom(payer)).length
        const payload = yield* signed(0)
        const requestId = newRequestId()
        yield* chainDo((c) => c.pauseMining())
        const pending = yield* Effect.flip(reserveAndCommit(payload, requestId))
        const tx = (pending as { payment_response: { transaction: `0x${string}` } }).payment_response.transaction
        yield* chainDo(async (c) => expect(await c.dropTransaction(tx)).toBe(true))
        yield* chainDo((c) => c.resumeMining())
        const settled = yield* retry(payload, requestId)
        expect(receiptOf(settled.paymentResponse)).toMatchObject({ success: true, transaction: tx })
        expect((yield* transfersFrom(payer)).length).toBe(before + 1)
      }))
  })

  layer(X402Test(), { excludeTestServices: true })("a pending payment whose authorization expires", (it) => {
    it.effect("is a failed payment: 402 invalid_payment, nothing transferred, nothing served", () =>
      Effect.gen(function* () {
        const payer = yield* payerAddress(0)
        const payload = yield* signed(0)
        const requestId = newRequestId()
        yield* chainDo((c) => c.pauseMining())
        yield* Effect.flip(reserveAndCommit(payload, requestId))
        // The transfer is mined only after validBefore: the token refuses it.
        yield* chainDo((c) => c.advanceTime(3600))
        yield* chainDo((c) => c.resumeMining())
        const { error, headers } = yield* refusal(retry(payload, requestId))
        expect(error).toMatchObject({ _tag: "PaymentRequired", error: { code: "invalid_payment" } })
        expect((error as { error: { message: string } }).error.message).toMatch(/expired/)
        // The fresh challenge of the body is the one in PAYMENT-REQUIRED.
        expect(decodeChallengeHeader(headers)).toEqual((error as { payment_required: unknown }).payment_required)
        expect(yield* transfersFrom(payer)).toHaveLength(0)
        // The answer stays the same.
        expect(yield* Effect.flip(retry(payload, requestId))).toMatchObject({ _tag: "PaymentRequired" })
      }))
  })

  const resolved = Ref.unsafeMake<ReadonlyArray<string>>([])
  const Resolutions = Layer.succeed(PaymentResolutions, {
    settled: (requestId) => Ref.update(resolved, (all) => [...all, `settled:${requestId}`]),
    failed: (requestId) => Ref.update(resolved, (all) => [...all, `failed:${requestId}`])
  })

  layer(X402Test({ reconciler: { interval: "200 millis", minAge: "100 millis" }, resolutions: Resolutions }), {
    excludeTestServices: true
  })("background reconciler", (it) => {
    it.effect("settles a pending payment nobody retries; the late retry replays the same receipt", () =>
      Effect.gen(function* () {
        const reconciler = yield* X402Reconciler
        const passes = yield* PubSub.subscribe(reconciler.passes)
        const payer = yield* payerAddress(1)
        const payload = yield* signed(1)
        const requestId = newRequestId()
        yield* chainDo((c) => c.pauseMining())
        const pending = yield* Effect.flip(reserveAndCommit(payload, requestId))
        expect(pending).toMatchObject({ error: { code: "payment_pending" } })
        // Mined, but the client never comes back: the reconciler's next passes find it.
        yield* chainDo((c) => c.resumeMining())
        const settledPass = yield* Queue.take(passes).pipe(
          Effect.repeat({ until: (pass) => pass.settled.some((s) => s.requestId === requestId) })
        )
        expect(settledPass.failed).toEqual([])
        expect(yield* Ref.get(resolved)).toEqual([`settled:${requestId}`])
        const transfers = yield* transfersFrom(payer)
        expect(transfers).toHaveLength(1)
        const late = yield* retry(payload, requestId)
        expect(receiptOf(late.paymentResponse).transaction).toBe(transfers[0]!.transactionHash)
        expect(yield* transfersFrom(payer)).toHaveLength(1)
      }).pipe(Effect.scoped))
  })

  // The facilitator of the layer below, so a test can make it misbehave.
  let facilitatorOfLayer: TestFacilitator | undefined
  const facilitatorMode = (mode: FacilitatorMode) => Effect.sync(() => facilitatorOfLayer?.setMode(mode))

  layer(
    X402Test({
      env: (chain) =>
        Effect.map(startFacilitator(chain, 300), (facilitator) => {
          facilitatorOfLayer = facilitator
          // The facilitator answers pending after its own 300 ms receipt wait; our client waits far longer for that
          // answer, so that a busy machine cannot turn it into no answer at all (which is payment_pending without a hash).
          return { X402_FACILITATOR_URL: facilitator.url, X402_CONFIRM_TIMEOUT_MS: "10000" }
        })
    }),
    { excludeTestServices: true }
  )("settlement through an x402 facilitator", (it) => {
    it.effect("verifies and settles over /verify and /settle: one transfer, the receipt names it", () =>
      Effect.gen(function* () {
        const payer = yield* payerAddress(0)
        const before = yield* balance(payer)
        const settled = yield* reserveAndCommit(yield* signed(0), newRequestId())
        const receipt = receiptOf(settled.paymentResponse)
        expect(receipt).toMatchObject({ success: true, network: "eip155:8453", payer: getAddress(payer) })
        expect(yield* transfersFrom(payer)).toEqual([{ transactionHash: receipt.transaction, value: PRICE }])
        expect(yield* balance(payer)).toBe(before - PRICE)
      }))

    it.effect("a facilitator's settlement_pending is payment_pending; the retry reconciles by hash, one transfer", () =>
      Effect.gen(function* () {
        const payer = yield* payerAddress(1)
        const payload = yield* signed(1)
        const requestId = newRequestId()
        yield* chainDo((c) => c.pauseMining())
        const pending = yield* Effect.flip(reserveAndCommit(payload, requestId))
        expect(pending).toMatchObject({ _tag: "ServiceUnavailable", error: { code: "payment_pending" } })
        const tx = (pending as { payment_response: { transaction: string } }).payment_response.transaction
        expect(tx).toMatch(/^0x[0-9a-f]{64}$/)
        yield* chainDo((c) => c.resumeMining())
        const settled = yield* retry(payload, requestId)
        expect(receiptOf(settled.paymentResponse).transaction).toBe(tx)
        expect(yield* transfersFrom(payer)).toEqual([{ transactionHash: tx, value: PRICE }])
      }).pipe(Effect.ensuring(chainDo((c) => c.resumeMining()))))

    for (const [mode, i, what] of [
      ["send-then-time-out", 2, "an error with an empty hash after its send timed out"],
      ["pending-without-hash", 3, "settlement_pending without a hash"]
    ] as const) {
      it.effect(`a facilitator that answers ${what} is payment_pending, not a refusal: the transfer mined later pays the retry, once`, () =>
        Effect.gen(function* () {
          const payer = yield* payerAddress(i)
          const payload = yield* signed(i)
          const requestId = newRequestId()
          yield* chainDo((c) => c.pauseMining())
          yield* facilitatorMode(mode)
          const pending = yield* Effect.flip(reserveAndCommit(payload, requestId)).pipe(Effect.ensuring(facilitatorMode("normal")))
          // Its transfer is in the mempool: "nothing was charged, sign a new payment" would be a lie.
          expect(pending).toMatchObject({ _tag: "ServiceUnavailable", error: { code: "payment_pending", request_id: requestId } })
          expect(yield* chainDo((c) => c.pendingTransactions())).toBe(1)
          yield* chainDo((c) => c.resumeMining())
          const settled = yield* retry(payload, requestId)
          const transfers = yield* transfersFrom(payer)
          expect(transfers).toEqual([{ transactionHash: receiptOf(settled.paymentResponse).transaction, value: PRICE }])
        }).pipe(Effect.ensuring(chainDo((c) => c.resumeMining()))))
    }

    it.effect("a payment the facilitator refuses is a 402 with its reason", () =>
      Effect.gen(function* () {
        const chain = yield* Chain
        const terms = yield* challenge
        const payload = yield* Effect.promise(() => signPayment(chain.accounts.pauper, terms))
        const x402 = yield* X402Funding
        const method = yield* x402.identify(paymentCredential(header(payload)))
        const error = yield* Effect.flip(method.reserve(newRequestId()))
        expect(error).toMatchObject({ _tag: "PaymentRequired", error: { code: "invalid_payment" } })
        expect((error as { error: { message: string } }).error.message).toMatch(/insufficient_balance/)
      }))
  })
})
