/** Read access to the payment chain (X402_RPC_URL): receipts, authorization state, logs and chain time. */
import { Context, Data, Effect, Layer, Option } from "effect"
import {
  type Address,
  createPublicClient,
  defineChain,
  type Hex,
  http,
  isAddressEqual,
  type Log,
  parseAbi,
  parseEventLogs,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError
} from "viem"
import { base } from "viem/chains"
import { AppConfig } from "../config.ts"

export class ChainUnavailable extends Data.TaggedError("ChainUnavailable")<{ readonly operation: string; readonly cause: unknown }> {
  override get message() {
    const detail = this.cause instanceof Error ? this.cause.message.split("\n")[0] : String(this.cause)
    return `chain ${this.operation} failed: ${detail}`
  }
}

export const eip3009Abi = parseAbi([
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "function balanceOf(address account) view returns (uint256)",
  "event Transfer(address indexed from, address indexed to, uint256 value)",
  "event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)",
  "event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)"
])

const authorizationUsedEvent = eip3009Abi[5]
const authorizationCanceledEvent = eip3009Abi[6]

export interface Receipt {
  readonly status: "success" | "reverted"
  readonly blockNumber: bigint
  readonly logs: ReadonlyArray<Log>
}

export interface ExpectedTransfer {
  readonly asset: Address
  readonly from: Address
  readonly to: Address
  readonly value: bigint
}

/** True when the receipt carries the token's Transfer event for exactly this payment. */
export const carriesTransfer = (receipt: Receipt, expected: ExpectedTransfer): boolean =>
  parseEventLogs({
    abi: eip3009Abi,
    eventName: "Transfer",
    logs: receipt.logs.filter((l) => isAddressEqual(l.address, expected.asset))
  }).some(
    (l) => isAddressEqual(l.args.from, expected.from) && isAddressEqual(l.args.to, expected.to) && l.args.value === expected.value
  )

/** Base mainnet as viem knows it, reached through the configured RPC. */
export const paymentChain = (rpcUrl: string) => defineChain({ ...base, rpcUrls: { default: { http: [rpcUrl] } } })

export class EvmChain extends Context.Tag("morsel/x402/EvmChain")<
  EvmChain,
  {
    readonly client: PaymentClient
    readonly receipt: (hash: Hex) => Effect.Effect<Option.Option<Receipt>, ChainUnavailable>
    /** Whether the node knows the transaction at all (mined or waiting in its mempool). */
    readonly knows: (hash: Hex) => Effect.Effect<boolean, ChainUnavailable>
    /** authorizationState at `blockNumber` (latest when omitted). */
    readonly authorizationUsed: (asset: Address, authorizer: Address, nonce: Hex, blockNumber?: bigint) => Effect.Effect<boolean, ChainUnavailable>
    /**
     * The transaction that spent (AuthorizationUsed) or canceled (AuthorizationCanceled) this authorization, searched
     * from `fromBlock` up to the first block at or past `validBefore` (the token refuses it from then on).
     */
    readonly authorizationSpentBy: (
      asset: Address,
      authorizer: Address,
      nonce: Hex,
      bounds: { readonly fromBlock: bigint; readonly validBefore: bigint }
    ) => Effect.Effect<Option.Option<{ readonly kind: "used" | "canceled"; readonly txHash: Hex }>, ChainUnavailable>
    readonly latestBlock: Effect.Effect<{ readonly number: bigint; readonly timestamp: bigint }, ChainUnavailable>
    readonly hasCode: (address: Address) => Effect.Effect<boolean, ChainUnavailable>
  }
>() {}

const call = <A>(operation: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (cause) => new ChainUnavailable({ operation, cause }) })

/** Logs are fetched in windows: public RPCs refuse wide ranges. */
const LOG_WINDOW = 10_000n

export const makeEvmChain = (client: PaymentClient): Context.Tag.Service<EvmChain> => ({
  client,
  receipt: (hash) =>
    Effect.tryPromise({ try: () => client.getTransactionReceipt({ hash }), catch: (cause) => cause }).pipe(
      Effect.map((r): Option.Option<Receipt> => Option.some({ status: r.status, blockNumber: r.blockNumber, logs: r.logs })),
      Effect.catchAll((cause) =>
        cause instanceof TransactionReceiptNotFoundError
          ? Effect.succeed(Option.none())
          : Effect.fail(new ChainUnavailable({ operation: "receipt lookup", cause }))
      )
    ),
  knows: (hash) =>
    Effect.tryPromise({ try: () => client.getTransaction({ hash }), catch: (cause) => cause }).pipe(
      Effect.as(true),
      Effect.catchAll((cause) =>
        cause instanceof TransactionNotFoundError ? Effect.succeed(false) : Effect.fail(new ChainUnavailable({ operation: "transaction lookup", cause }))
      )
    ),
  authorizationUsed: (asset, authorizer, nonce, blockNumber) =>
    call("authorizationState", () =>
      client.readContract({
        address: asset,
        abi: eip3009Abi,
        functionName: "authorizationState",
        args: [authorizer, nonce],
        ...(blockNumber !== undefined ? { blockNumber } : {})
      })
    ),
  authorizationSpentBy: (asset, authorizer, nonce, { fromBlock, validBefore }) =>
    Effect.gen(function* () {
      // viem caches the block number for seconds: the spend may be newer than that.
      const latest = yield* call("block number", () => client.getBlockNumber({ cacheTime: 0 }))
      for (let start = fromBlock; start <= latest; start += LOG_WINDOW) {
        if (start > fromBlock) {
          // No block from validBefore on can spend the authorization: stop there rather than at the head.
          const opening = yield* call("block lookup", () => client.getBlock({ blockNumber: start }))
          if (opening.timestamp >= validBefore) break
        }
        const end = start + LOG_WINDOW - 1n < latest ? start + LOG_WINDOW - 1n : latest
        const range = { address: asset, args: { authorizer, nonce }, fromBlock: start, toBlock: end }
        const used = yield* call("AuthorizationUsed logs", () => client.getLogs({ ...range, event: authorizationUsedEvent }))
        const usedBy = used.find((l) => l.transactionHash !== null)?.transactionHash
        if (usedBy) return Option.some({ kind: "used" as const, txHash: usedBy })
        const canceled = yield* call("AuthorizationCanceled logs", () => client.getLogs({ ...range, event: authorizationCanceledEvent }))
        const canceledBy = canceled.find((l) => l.transactionHash !== null)?.transactionHash
        if (canceledBy) return Option.some({ kind: "canceled" as const, txHash: canceledBy })
      }
      return Option.none()
    }),
  latestBlock: call("latest block", () => client.getBlock({ blockTag: "latest" })).pipe(
    Effect.map((b) => ({ number: b.number, timestamp: b.timestamp }))
  ),
  hasCode: (address) => call("code lookup", () => client.getCode({ address })).pipe(Effect.map((code) => code !== undefined && code !== "0x"))
})

/** A viem client for the payment chain at `rpcUrl`. */
export const createPaymentClient = (rpcUrl: string, options: { readonly pollingInterval?: number } = {}) =>
  createPublicClient({
    chain: paymentChain(rpcUrl),
    transport: http(rpcUrl, { retryCount: 1, timeout: 10_000 }),
    ...(options.pollingInterval ? { pollingInterval: options.pollingInterval } : {})
  })

export type PaymentClient = ReturnType<typeof createPaymentClient>

export const EvmChainLive = Layer.effect(
  EvmChain,
  Effect.map(AppConfig, (settings) => makeEvmChain(createPaymentClient(settings.x402.rpcUrl)))
)
