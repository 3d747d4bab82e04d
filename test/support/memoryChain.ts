/** The payment chain as x402 tests see it, on either chain: the memory chain of the sandbox, or the local hardhat chain. */
import { Context, Effect, Layer } from "effect"
import { type Hex, keccak256, toHex } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { BASE_USDC } from "../../src/config.ts"
import { ChainMemory } from "../../src/x402/ChainMemory.ts"
import { MemoryChain, makeMemoryChain } from "../../src/x402/MemoryChain.ts"
import { Chain, type ChainAccounts, type LocalChain } from "./chain.ts"

/** What a test reads and drives on a payment chain: what the local chain (LocalChain) and the memory chain both have. */
export type PaymentChain = Pick<LocalChain, "token" | "env" | "balanceOf" | "transfers" | "authorizationUsed" | "pauseMining" | "resumeMining"> & {
  readonly accounts: Pick<ChainAccounts, "payers" | "pauper" | "payTo">
}

export class TestChain extends Context.Tag("test/TestChain")<TestChain, PaymentChain>() {
  /** The local hardhat chain of the layer (Chain) as a PaymentChain. */
  static readonly fromLocal = Layer.effect(TestChain, Chain)

  /**
   * A fresh memory chain for Base USDC (the official client's default token) with its MemoryChain, for
   * `X402Layer(…, ChainMemory)`; its pauper holds nothing.
   */
  static readonly memory = (options: { readonly payers?: number } = {}) =>
    Layer.effect(
      TestChain,
      Effect.gen(function* () {
        const chain = yield* MemoryChain
        const key = (label: string): Hex => keccak256(toHex(`morsel memory chain ${label}`))
        const accounts = {
          payers: Array.from({ length: options.payers ?? 4 }, (_, i) => privateKeyToAccount(key(`payer ${i}`))),
          pauper: privateKeyToAccount(key("pauper")),
          payTo: privateKeyToAccount(key("pay to"))
        }
        yield* chain.setBalance(accounts.pauper.address, 0n)
        const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(effect)
        return {
          token: chain.asset,
          accounts,
          env: { X402_PAY_TO: accounts.payTo.address },
          balanceOf: (address) => run(chain.balanceOf(address)),
          transfers: (from, to) => run(chain.transfers(from, to)).then((all) => all.map(({ transactionHash, value }) => ({ transactionHash, value }))),
          authorizationUsed: (authorizer, nonce) => run(chain.authorizationUsed(authorizer, nonce)),
          pauseMining: () => run(chain.pauseMining),
          resumeMining: () => run(chain.resumeMining)
        } satisfies PaymentChain
      })
    ).pipe(Layer.provideMerge(Layer.sync(MemoryChain, () => makeMemoryChain(BASE_USDC))))
}

/** The chain seam on the layer's MemoryChain, for a test server (`startServer({ chain })`). */
export const memorySeam = Effect.map(MemoryChain, (chain) => ChainMemory.pipe(Layer.provide(Layer.succeed(MemoryChain, chain))))
