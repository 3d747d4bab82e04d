/** Steps the x402 tests take on the local chain: sign a payment, read transfers and balances. */
import { Effect } from "effect"
import type { Address } from "viem"
import { Chain } from "../support/chain.ts"
import { challenge } from "./layer.ts"
import { signPayment } from "./payer.ts"

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
