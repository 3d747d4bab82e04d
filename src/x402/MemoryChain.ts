/** An in-memory Base USDC and the node around it: EIP-3009 transfers checked as the token checks them, balances, blocks and receipts. */
import { Clock, Context, Effect, Layer, Option } from "effect"
import {
  type Address,
  encodeAbiParameters,
  getAddress,
  type Hex,
  isAddressEqual,
  keccak256,
  type Log,
  pad,
  toEventSelector,
  toHex
} from "viem"
import { AppConfig } from "../config.ts"
import { eip3009Abi, type Receipt } from "./EvmChain.ts"
import { type Authorization, authorizationSigner } from "./protocol.ts"

/** Every wallet the memory chain has not seen holds 100 USDC (6 decimals). */
export const STARTING_BALANCE = 100_000_000n

export interface MemoryTransfer {
  readonly transactionHash: Hex
  readonly from: Address
  readonly to: Address
  readonly value: bigint
}

export class MemoryChain extends Context.Tag("morsel/x402/MemoryChain")<
  MemoryChain,
  {
    /** The token contract: the only address with code. */
    readonly asset: Address
    /** The wallet's USDC in 6-decimal units. */
    readonly balanceOf: (address: Address) => Effect.Effect<bigint>
    /** Mined transfers from `from` to `to`, oldest first. */
    readonly transfers: (from: Address, to: Address) => Effect.Effect<ReadonlyArray<MemoryTransfer>>
    /** The token's authorizationState: used by a transfer mined at or before `atBlock` (the head when omitted). */
    readonly authorizationUsed: (authorizer: Address, nonce: Hex, atBlock?: bigint) => Effect.Effect<boolean>
    /** The mined transaction that used the authorization. */
    readonly usedBy: (authorizer: Address, nonce: Hex) => Effect.Effect<Option.Option<Hex>>
    /** The head: its number, and the chain's time as its timestamp (the Effect clock plus `advanceTime`). */
    readonly head: Effect.Effect<{ readonly number: bigint; readonly timestamp: bigint }>
    /** What the token would answer now to transferWithAuthorization: its revert reason, or none when the transfer would pass. */
    readonly simulate: (authorization: Authorization, signature: Hex) => Effect.Effect<Option.Option<string>>
    /** A transaction carrying the transfer, not sent yet: its hash is known first, as with a signed raw transaction. */
    readonly prepare: (authorization: Authorization) => Effect.Effect<{ readonly hash: Hex; readonly send: Effect.Effect<void> }>
    /** Send a known transaction again: a held one is released; true when the node knows it (waiting or mined). */
    readonly rebroadcast: (hash: Hex) => Effect.Effect<boolean>
    readonly receipt: (hash: Hex) => Effect.Effect<Option.Option<Receipt>>
    /** Whether the node knows the transaction (waiting or mined). */
    readonly knows: (hash: Hex) => Effect.Effect<boolean>
    /** Transactions sent and not mined yet. */
    readonly pendingTransactions: Effect.Effect<number>
    /** Stop mining: sent transactions wait until `resumeMining` or `mine`. */
    readonly pauseMining: Effect.Effect<void>
    /** Mine what waits and mine every later transaction at once again. */
    readonly resumeMining: Effect.Effect<void>
    /** Mine one block with every waiting transaction, held ones included. */
    readonly mine: Effect.Effect<void>
    /**
     * The first transaction that spends this authorization stays unconfirmed, even while mining; sending it again
     * (a retry's resend) confirms it. Does nothing once a transaction for it was sent.
     */
    readonly holdFirstSettlement: (authorizer: Address, nonce: Hex) => Effect.Effect<void>
    /** Give a wallet another balance (a wallet without funds, a rich one). */
    readonly setBalance: (address: Address, units: bigint) => Effect.Effect<void>
    /** Move the chain's clock forward. */
    readonly advanceTime: (seconds: number) => Effect.Effect<void>
  }
>() {}

/** A fresh memory chain for the configured token (X402_ASSET, Base USDC by default). */
export const MemoryChainLive = Layer.effect(
  MemoryChain,
  Effect.map(AppConfig, (settings) => makeMemoryChain(settings.x402.asset))
)

interface Transaction {
  readonly hash: Hex
  readonly authorization: Authorization
  held: boolean
  receipt: Option.Option<Receipt>
}

const transferEvent = toEventSelector(eip3009Abi[4])
const authorizationUsedEvent = toEventSelector(eip3009Abi[5])
const word = (address: Address) => pad(address.toLowerCase() as Hex, { size: 32 })
const authorizationKey = (authorizer: Address, nonce: Hex) => `${authorizer.toLowerCase()}:${nonce.toLowerCase()}`

export const makeMemoryChain = (token: Address): Context.Tag.Service<MemoryChain> => {
  const asset = getAddress(token)
  const balances = new Map<string, bigint>()
  /** Authorization key → the transaction that used it and its block. */
  const used = new Map<string, { readonly hash: Hex; readonly block: bigint }>()
  const transactions = new Map<Hex, Transaction>()
  const waiting: Array<Transaction> = []
  const held = new Set<string>()
  const sentFor = new Set<string>()
  const mined: Array<MemoryTransfer> = []
  let blockNumber = 0n
  let sequence = 0n
  let paused = false
  let offsetSeconds = 0n

  const balance = (address: Address) => balances.get(address.toLowerCase()) ?? STARTING_BALANCE
  const now = Effect.map(Clock.currentTimeMillis, (ms) => BigInt(Math.floor(ms / 1000)) + offsetSeconds)

  /** FiatTokenV2's checks of transferWithAuthorization, in its order and with its words (the signature aside). */
  const refusal = (a: Authorization, at: bigint): Option.Option<string> => {
    if (!(at > BigInt(a.validAfter))) return Option.some("FiatTokenV2: authorization is not yet valid")
    if (!(at < BigInt(a.validBefore))) return Option.some("FiatTokenV2: authorization is expired")
    if (used.has(authorizationKey(a.from, a.nonce))) return Option.some("FiatTokenV2: authorization is used or canceled")
    if (balance(a.from) < BigInt(a.value)) return Option.some("ERC20: transfer amount exceeds balance")
    return Option.none()
  }

  const logsOf = (tx: Transaction, blockHash: Hex): Array<Log> => {
    const { from, to, value, nonce } = tx.authorization
    const common = { address: asset, blockHash, blockNumber, transactionHash: tx.hash, transactionIndex: 0, removed: false }
    return [
      { ...common, logIndex: 0, topics: [transferEvent, word(from), word(to)], data: encodeAbiParameters([{ type: "uint256" }], [BigInt(value)]) },
      { ...common, logIndex: 1, topics: [authorizationUsedEvent, word(from), nonce], data: "0x" }
    ]
  }

  /** One block: each transaction is checked again at the block's time and either moves the balance or reverts. */
  const mineBlock = (txs: ReadonlyArray<Transaction>, at: bigint) => {
    if (txs.length === 0) return
    blockNumber += 1n
    const blockHash = keccak256(toHex(blockNumber, { size: 32 }))
    for (const tx of txs) {
      const a = tx.authorization
      const fails = Option.isSome(refusal(a, at))
      if (!fails) {
        balances.set(a.from.toLowerCase(), balance(a.from) - BigInt(a.value))
        balances.set(a.to.toLowerCase(), balance(a.to) + BigInt(a.value))
        used.set(authorizationKey(a.from, a.nonce), { hash: tx.hash, block: blockNumber })
        mined.push({ transactionHash: tx.hash, from: getAddress(a.from), to: getAddress(a.to), value: BigInt(a.value) })
      }
      tx.receipt = Option.some({ status: fails ? "reverted" : "success", blockNumber, logs: fails ? [] : logsOf(tx, blockHash) })
      const i = waiting.indexOf(tx)
      if (i >= 0) waiting.splice(i, 1)
    }
  }

  const mineWaiting = (includeHeld: boolean) =>
    Effect.flatMap(now, (at) => Effect.sync(() => mineBlock(waiting.filter((tx) => includeHeld || !tx.held), at)))

  const send = (tx: Transaction) =>
    Effect.flatMap(now, (at) =>
      Effect.sync(() => {
        if (transactions.has(tx.hash)) return
        const key = authorizationKey(tx.authorization.from, tx.authorization.nonce)
        tx.held = held.delete(key) && !sentFor.has(key)
        sentFor.add(key)
        transactions.set(tx.hash, tx)
        waiting.push(tx)
        if (!paused && !tx.held) mineBlock([tx], at)
      })
    )

  return {
    asset,
    balanceOf: (address) => Effect.sync(() => balance(address)),
    transfers: (from, to) => Effect.sync(() => mined.filter((t) => isAddressEqual(t.from, from) && isAddressEqual(t.to, to))),
    authorizationUsed: (authorizer, nonce, atBlock) =>
      Effect.sync(() => {
        const spend = used.get(authorizationKey(authorizer, nonce))
        return spend !== undefined && (atBlock === undefined || spend.block <= atBlock)
      }),
    usedBy: (authorizer, nonce) => Effect.sync(() => Option.map(Option.fromNullable(used.get(authorizationKey(authorizer, nonce))), (s) => s.hash)),
    head: Effect.map(now, (timestamp) => ({ number: blockNumber, timestamp })),
    simulate: (a, signature) =>
      Effect.gen(function* () {
        const signer = yield* Effect.option(authorizationSigner(asset, a, signature))
        const at = yield* now
        const early = refusal(a, at)
        // The token reads window and nonce before it recovers the signer.
        if (Option.isSome(early) && !early.value.startsWith("ERC20")) return early
        if (Option.isNone(signer) || !isAddressEqual(signer.value, a.from)) return Option.some("FiatTokenV2: invalid signature")
        return early
      }),
    prepare: (authorization) =>
      Effect.sync(() => {
        sequence += 1n
        const hash = keccak256(
          encodeAbiParameters(
            [{ type: "address" }, { type: "address" }, { type: "bytes32" }, { type: "uint256" }],
            [asset, authorization.from, authorization.nonce, sequence]
          )
        )
        const tx: Transaction = { hash, authorization, held: false, receipt: Option.none() }
        return { hash, send: send(tx) }
      }),
    rebroadcast: (hash) =>
      Effect.flatMap(now, (at) =>
        Effect.sync(() => {
          const tx = transactions.get(hash)
          if (tx === undefined) return false
          if (tx.held && Option.isNone(tx.receipt)) {
            tx.held = false
            if (!paused) mineBlock([tx], at)
          }
          return true
        })
      ),
    receipt: (hash) => Effect.sync(() => Option.flatMap(Option.fromNullable(transactions.get(hash)), (tx) => tx.receipt)),
    knows: (hash) => Effect.sync(() => transactions.has(hash)),
    pendingTransactions: Effect.sync(() => waiting.length),
    pauseMining: Effect.sync(() => {
      paused = true
    }),
    resumeMining: Effect.sync(() => {
      paused = false
    }).pipe(Effect.zipRight(mineWaiting(false))),
    mine: mineWaiting(true),
    holdFirstSettlement: (authorizer, nonce) =>
      Effect.sync(() => {
        const key = authorizationKey(authorizer, nonce)
        if (!sentFor.has(key)) held.add(key)
      }),
    setBalance: (address, units) =>
      Effect.sync(() => {
        balances.set(address.toLowerCase(), units)
      }),
    advanceTime: (seconds) =>
      Effect.sync(() => {
        offsetSeconds += BigInt(seconds)
      })
  }
}
