// x402 retries against the interleavings a review could not rule out: a claim stored while its answer was lost, and
// the reconciler settling a pending payment between a retry's claim and its saving of the result.
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { RequestStore, RequestStoreLive } from "../../src/analysis/RequestStore.ts"
import type { RequestId } from "../../src/domain/ids.ts"
import { InputFingerprint, PayerId } from "../../src/domain/ids.ts"
import { AnalysisResult, analysisResultExample } from "../../src/domain/schemas.ts"
import { X402Funding } from "../../src/x402/X402Funding.ts"
import { paymentCredential, unsaved } from "../support/funding.ts"
import { TestChain } from "../support/memoryChain.ts"
import { header, signPayment } from "../support/x402.ts"
import { challenge, X402MemoryTest } from "./layer.ts"

const sign = (account: PrivateKeyAccount) => Effect.flatMap(challenge, (terms) => Effect.promise(() => signPayment(account, terms)))

const payerOf = (i: number) => Effect.map(TestChain, (chain) => chain.accounts.payers[i]!)

const transfersOf = (account: PrivateKeyAccount) =>
  Effect.flatMap(TestChain, (chain) => Effect.promise(() => chain.transfers(account.address, chain.accounts.payTo.address)))

/** A new attempt of (payer, key), recorded as the analysis pipeline records it before anything is reserved. */
const startAttempt = (account: PrivateKeyAccount, idempotencyKey: string) =>
  Effect.gen(function* () {
    const store = yield* RequestStore
    const { claim } = yield* store.claim({
      payer: PayerId.make(`wallet:${account.address.toLowerCase()}`),
      idempotencyKey,
      fingerprint: InputFingerprint.make("same-input"),
      funding: "x402",
      leaseMs: 120_000
    })
    if (claim._tag !== "Started") throw new Error(`expected a new attempt, got ${claim._tag}`)
    return claim.requestId as RequestId
  })

describe("an x402 claim whose answer was lost", () => {
  layer(RequestStoreLive.pipe(Layer.provideMerge(X402MemoryTest())), { excludeTestServices: true })("on the memory chain", (it) => {
    it.effect("the retry after the attempt was given up is served and paid once, not refused as a reused authorization", () =>
      Effect.gen(function* () {
        const x402 = yield* X402Funding
        const store = yield* RequestStore
        const account = yield* payerOf(0)
        const payload = yield* sign(account)
        const method = yield* x402.identify(paymentCredential(header(payload)))

        // The claim is stored, but its caller saw a storage failure: the pipeline gives the attempt up.
        const first = yield* startAttempt(account, "lost-claim-key-0001")
        yield* method.reserve(first)
        yield* store.forget(first)

        // The client retries the identical request: same Idempotency-Key, same signed payment.
        const second = yield* startAttempt(account, "lost-claim-key-0001")
        expect(second).not.toBe(first)
        const reservation = yield* method.reserve(second)
        const settled = yield* reservation.settle(unsaved)
        expect(settled.paymentResponse._tag).toBe("Some")
        expect(yield* transfersOf(account)).toHaveLength(1)
      }))

    it.effect("the reconciler settles a pending payment between a retry's claim and its save: the retry answers the result", () =>
      Effect.gen(function* () {
        const store = yield* RequestStore
        const account = yield* payerOf(1)
        const requestId = yield* startAttempt(account, "settle-race-key-0001")
        const result = AnalysisResult.make({ ...analysisResultExample, request_id: requestId })
        // The first attempt saved its result as pending: the payment was submitted but not yet confirmed.
        yield* store.pending(requestId, result, Option.none())
        // The retry resumes the payment and sees it confirmed; before it saves, the reconciler does the same.
        yield* store.settlePending(requestId, "receipt")
        const saved = yield* Effect.either(store.complete(requestId, result, Option.some("receipt")))
        expect(saved._tag).toBe("Right")
        // A running attempt lost to another instance is still refused.
        const lost = yield* startAttempt(account, "settle-race-key-0002")
        yield* store.fail(lost, "abandoned", false)
        const refused = yield* Effect.either(store.complete(lost, AnalysisResult.make({ ...analysisResultExample, request_id: lost }), Option.none()))
        expect(refused._tag).toBe("Left")
      }))
  })
})
