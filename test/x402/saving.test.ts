// How the x402 rail saves the result it settles for: pending before anything is submitted, paid after, nothing paid unsaved.
import type { PaymentPayload } from "@x402/core/types"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Ref } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import type { Save } from "../../src/analysis/Funding.ts"
import { storageUnavailable } from "../../src/db/storage.ts"
import { MemoryChain } from "../../src/x402/MemoryChain.ts"
import { X402Funding } from "../../src/x402/X402Funding.ts"
import { newRequestId, paymentCredential, unsaved } from "../support/funding.ts"
import { TestChain } from "../support/memoryChain.ts"
import { authorizationOf, header, signPayment } from "../support/x402.ts"
import { reserveAndCommit } from "./chainSteps.ts"
import { challenge, X402MemoryTest } from "./layer.ts"

const payer = (i: number) =>
  Effect.gen(function* () {
    const chain = yield* TestChain
    const account = chain.accounts.payers[i]!
    const payload = yield* Effect.flatMap(challenge, (terms) => Effect.promise(() => signPayment(account, terms)))
    return { account, payload }
  })

const transfersOf = (account: PrivateKeyAccount) =>
  Effect.flatMap(TestChain, (chain) => Effect.promise(() => chain.transfers(account.address, chain.accounts.payTo.address)))

const reserve = (payload: PaymentPayload) =>
  Effect.flatMap(X402Funding, (x402) => Effect.flatMap(x402.identify(paymentCredential(header(payload))), (m) => m.reserve(newRequestId())))

/** A Save that writes down each step with the number of transfers the payer had made by then. */
const watching = (account: PrivateKeyAccount) =>
  Effect.gen(function* () {
    const chain = yield* TestChain
    const steps = yield* Ref.make<ReadonlyArray<string>>([])
    const note = (step: string) =>
      Effect.flatMap(transfersOf(account), (transfers) => Ref.update(steps, (all) => [...all, `${step} after ${transfers.length} transfers`])).pipe(
        Effect.provideService(TestChain, chain)
      )
    const save: Save = { pending: note("pending"), complete: () => note("complete"), failed: (code) => note(`failed:${code}`) }
    return { save, steps: Ref.get(steps) }
  })

describe("x402 settlement and the saved result", () => {
  layer(X402MemoryTest({ payers: 3 }), { excludeTestServices: true })("saving", (it) => {
    it.effect("the result is saved as pending before the payment is submitted, and as paid once it settled", () =>
      Effect.gen(function* () {
        const { account, payload } = yield* payer(0)
        const { save, steps } = yield* watching(account)
        const reservation = yield* reserve(payload)
        yield* reservation.settle(save)
        expect(yield* steps).toEqual(["pending after 0 transfers", "complete after 1 transfers"])
      }))

    it.effect("a result that cannot be saved is never paid for: nothing is submitted and the authorization pays a later attempt", () =>
      Effect.gen(function* () {
        const { account, payload } = yield* payer(1)
        const reservation = yield* reserve(payload)
        const refused = yield* Effect.flip(reservation.settle({ ...unsaved, pending: Effect.fail(storageUnavailable()) }))
        expect(refused.error.code).toBe("storage_unavailable")
        expect(yield* transfersOf(account)).toEqual([])
        yield* reserveAndCommit(payload, newRequestId())
        expect(yield* transfersOf(account)).toHaveLength(1)
      }))

    it.effect("a payment still pending on chain keeps its saved pending result: nothing is recorded as failed", () =>
      Effect.gen(function* () {
        const { account, payload } = yield* payer(2)
        const { from, nonce } = authorizationOf(payload)
        yield* Effect.flatMap(MemoryChain, (chain) => chain.holdFirstSettlement(from, nonce))
        const { save, steps } = yield* watching(account)
        const pending = yield* Effect.flip(Effect.flatMap(reserve(payload), (reservation) => reservation.settle(save)))
        expect(pending).toMatchObject({ _tag: "ServiceUnavailable", error: { code: "payment_pending" } })
        expect(yield* steps).toEqual(["pending after 0 transfers"])
      }))
  })
})
