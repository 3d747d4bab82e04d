/** The payment chain as x402 tests see it, on either chain: the memory chain of the sandbox, or the local hardhat chain. */
import { Context, Effect, Layer } from "effect"
import { type Address, type Hex, keccak256, toHex } from "viem"
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { BASE_USDC } from "../../src/config.ts"
import { MemoryChain, makeMemoryChain } from "../../src/x402/MemoryChain.ts"
import { Chain } from "./chain.ts"

/** What a test reads and drives on a payment chain; the local chain (LocalChain) has all of it and more. */
export interface PaymentChain {
  readonly token: Address
  readonly accounts: {
    /** Payers holding 100 USDC each at start. */
    readonly payers: ReadonlyArray<PrivateKeyAccount>
    /** A wallet without funds. */
    readonly pauper: PrivateKeyAccount
    /** The seller (X402_PAY_TO). */
    readonly payTo: PrivateKeyAccount
  }
  /** Env entries that point the server's x402 settings at this chain. */
  readonly env: Readonly<Record<string, string>>
  readonly balanceOf: (address: Address) => Promise<bigint>
  readonly transfers: (from: Address, to: Address) => Promise<ReadonlyArray<{ readonly transactionHash: Hex; readonly value: bigint }>>
  readonly authorizationUsed: (authorizer: Address, nonce: Hex) => Promise<boolean>
  readonly pauseMining: () => Promise<void>
  readonly resumeMining: () => Promise<void>
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
