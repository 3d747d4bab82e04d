/** Steps the x402 tests take on the local chain: sign, pay and retry a payment, read transfers and balances. */
import type { PaymentPayload } from "@x402/core/types"
import { Effect } from "effect"
import type { Address } from "viem"
import type { RequestId } from "../../src/domain/ids.ts"
import { X402Funding } from "../../src/x402/X402Funding.ts"
import { Chain } from "../support/chain.ts"
import { challenge } from "./layer.ts"
import { header, signPayment } from "../support/x402.ts"
import { paymentCredential, unsaved } from "../support/funding.ts"

/** A fresh payment signed by payer `i` for the server's current challenge. */
export const signed = (i: number) =>
  Effect.gen(function* () {
    const chain = yield* Chain
    const terms = yield* challenge
    return yield* Effect.promise(() => signPayment(chain.accounts.payers[i]!, terms))
  })

export const payerAddress = (i: number) => Effect.map(Chain, (chain) => chain.accounts.payers[i]!.address)

export const transfersFrom = (from: Address) =>
  Effect.flatMap(Chain, (chain) => Effect.promise(() => chain.transfers(from, chain.accounts.payTo.address)))

export const balance = (address: Address) => Effect.flatMap(Chain, (chain) => Effect.promise(() => chain.balanceOf(address)))

export const chainDo = (f: (chain: Chain["Type"]) => Promise<unknown>) => Effect.flatMap(Chain, (chain) => Effect.promise(() => f(chain)))

/** What a client retrying the same request does: send the same PAYMENT-SIGNATURE again, which resumes the payment. */
export const retry = (payload: PaymentPayload, requestId: RequestId) =>
  Effect.flatMap(X402Funding, (x402) => Effect.flatMap(x402.identify(paymentCredential(header(payload))), (m) => m.resume(requestId, unsaved)))

export const reserveAndCommit = (payload: PaymentPayload, requestId: RequestId) =>
  Effect.gen(function* () {
    const x402 = yield* X402Funding
    const method = yield* x402.identify(paymentCredential(header(payload)))
    const reservation = yield* method.reserve(requestId)
    return yield* reservation.settle(unsaved)
  })
