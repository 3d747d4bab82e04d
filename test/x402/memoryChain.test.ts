// What only the memory chain has: wallets that start with 100 USDC, their balance route, and a settlement held for one retry.
import { HttpLayerRouter } from "@effect/platform"
import { decodePaymentResponseHeader } from "@x402/core/http"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Layer, Option } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { MemoryChain } from "../../src/x402/MemoryChain.ts"
import { WalletsRoute } from "../../src/x402/WalletsRoute.ts"
import { TestChain } from "../support/memoryChain.ts"
import { reserveAndCommit, retry } from "./chainSteps.ts"
import { newRequestId } from "../support/funding.ts"
import { challenge, X402MemoryTest } from "./layer.ts"
import { authorizationOf, signPayment } from "../support/x402.ts"

/** GET /sandbox/wallets/{address} on the layer's memory chain. */
const wallet = (address: string) =>
  Effect.gen(function* () {
    const chain = yield* MemoryChain
    const { handler, dispose } = HttpLayerRouter.toWebHandler(WalletsRoute.pipe(Layer.provide(Layer.succeed(MemoryChain, chain))), {
      disableLogger: true
    })
    const response = yield* Effect.promise(() => handler(new Request(`http://127.0.0.1/sandbox/wallets/${address}`)))
    const body: unknown = yield* Effect.promise(() => response.json())
    yield* Effect.promise(() => dispose())
    return { status: response.status, body }
  })

const sign = (account: PrivateKeyAccount) => Effect.flatMap(challenge, (terms) => Effect.promise(() => signPayment(account, terms)))

const payerOf = (i: number) => Effect.map(TestChain, (chain) => chain.accounts.payers[i]!)

const transfersOf = (account: PrivateKeyAccount) =>
  Effect.flatMap(TestChain, (chain) => Effect.promise(() => chain.transfers(account.address, chain.accounts.payTo.address)))

describe("the memory chain", () => {
  layer(X402MemoryTest(), { excludeTestServices: true })("wallets and held settlements", (it) => {
    it.effect("every wallet starts with 100 USDC; the wallet route shows it, and a payment takes exactly 0.01 from it", () =>
      Effect.gen(function* () {
        const account = yield* payerOf(0)
        const balance = { address: account.address, network: "eip155:8453", asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913" }
        expect(yield* wallet(account.address.toLowerCase())).toEqual({ status: 200, body: { ...balance, usdc: "100.000000", units: "100000000" } })
        yield* reserveAndCommit(yield* sign(account), newRequestId())
        expect(yield* wallet(account.address)).toEqual({ status: 200, body: { ...balance, usdc: "99.990000", units: "99990000" } })
        const refused = yield* wallet("0x1234")
        expect(refused).toMatchObject({ status: 400, body: { error: { code: "invalid_request" } } })
      }))

    it.effect("a held settlement stays pending while blocks are mined; the identical retry confirms it, one transfer", () =>
      Effect.gen(function* () {
        const chain = yield* MemoryChain
        const account = yield* payerOf(1)
        const payload = yield* sign(account)
        const { from, nonce } = authorizationOf(payload)
        const requestId = newRequestId()
        yield* chain.holdFirstSettlement(from, nonce)
        const pending = yield* Effect.flip(reserveAndCommit(payload, requestId))
        expect(pending).toMatchObject({ _tag: "ServiceUnavailable", error: { code: "payment_pending" } })
        const tx = (pending as { payment_response: { transaction: string } }).payment_response.transaction
        expect(yield* chain.pendingTransactions).toBe(1)
        expect(yield* transfersOf(account)).toEqual([])
        // The retry asks for the hold again (the same request, the same header): the first settlement was held, not this one.
        yield* chain.holdFirstSettlement(from, nonce)
        const settled = yield* retry(payload, requestId)
        expect(decodePaymentResponseHeader(Option.getOrThrow(settled.paymentResponse))).toMatchObject({ success: true, transaction: tx })
        expect(yield* transfersOf(account)).toEqual([{ transactionHash: tx, value: 10_000n }])
        expect(yield* chain.balanceOf(account.address)).toBe(100_000_000n - 10_000n)
      }))

    it.effect("20 concurrent attempts of one request, and the same authorization under 20 other requests: one transfer, one receipt", () =>
      Effect.gen(function* () {
        const chain = yield* MemoryChain
        const account = yield* payerOf(3)
        const payload = yield* sign(account)
        const requestId = newRequestId()
        const attempts = yield* Effect.all(
          [
            ...Array.from({ length: 20 }, () => Effect.either(reserveAndCommit(payload, requestId))),
            ...Array.from({ length: 20 }, () => Effect.either(reserveAndCommit(payload, newRequestId())))
          ],
          { concurrency: "unbounded" }
        )
        const paid = attempts.filter(Either.isRight).map((a) => Option.getOrThrow(a.right.paymentResponse))
        const refused = attempts.filter(Either.isLeft).map((a) => a.left)
        for (const error of refused) expect(error).toMatchObject({ _tag: "Conflict", error: { code: "authorization_reused" } })
        expect(new Set(paid).size).toBe(1)
        const transfers = yield* transfersOf(account)
        expect(transfers).toEqual([{ transactionHash: decodePaymentResponseHeader(paid[0]!).transaction, value: 10_000n }])
        expect(yield* chain.balanceOf(account.address)).toBe(100_000_000n - 10_000n)
      }))

    it.effect("a pending transfer mined after its authorization expired reverts: the payment fails and nothing moves", () =>
      Effect.gen(function* () {
        const chain = yield* MemoryChain
        const account = yield* payerOf(2)
        const payload = yield* sign(account)
        const requestId = newRequestId()
        yield* chain.pauseMining
        yield* Effect.flip(reserveAndCommit(payload, requestId))
        yield* chain.advanceTime(3600)
        yield* chain.resumeMining
        const failed = yield* Effect.flip(retry(payload, requestId))
        expect(failed).toMatchObject({ _tag: "PaymentRequired", error: { code: "invalid_payment", message: expect.stringMatching(/expired/) } })
        expect(yield* transfersOf(account)).toEqual([])
        expect(yield* chain.balanceOf(account.address)).toBe(100_000_000n)
      }))
  })
})
