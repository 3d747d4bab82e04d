/** Submitting a claimed payment on chain: self-settlement with our own gas wallet, or through an x402 facilitator. */
import type { SqlError } from "@effect/sql"
import { HTTPFacilitatorClient } from "@x402/core/server"
import { type PaymentPayload, type PaymentRequirements, SettleError, type SettleResponse } from "@x402/core/types"
import { Context, Effect, Layer, Option, Redacted, Ref } from "effect"
import {
  type Address,
  BaseError,
  createWalletClient,
  encodeFunctionData,
  getAddress,
  type Hex,
  http,
  isHex,
  keccak256,
  parseSignature,
  parseTransaction,
  size
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { AppConfig } from "../config.ts"
import { ChainUnavailable, EvmChain, eip3009Abi, paymentChain } from "./EvmChain.ts"
import { PaymentStore, type PaymentRecord } from "./PaymentStore.ts"
import type { Authorization } from "./protocol.ts"

/** What one submission attempt achieved. */
export type Submission =
  /** Another attempt owns the submission of this payment. */
  | { readonly _tag: "Lost" }
  /** Nothing was sent: the chain or facilitator could not be reached; the payment may be submitted later. */
  | { readonly _tag: "NotSent"; readonly reason: string }
  /** The transfer would fail (or a facilitator refused it before sending anything); nothing was sent by this attempt. */
  | { readonly _tag: "Rejected"; readonly reason: string }
  /** Sent; its receipt decides. */
  | { readonly _tag: "Broadcast"; readonly txHash: Hex }
  /** A facilitator saw the transfer mined. */
  | { readonly _tag: "Confirmed"; readonly txHash: Hex }
  /** Maybe sent: whether and where it landed is unknown (a facilitator timed out, or failed after it may have broadcast). */
  | { readonly _tag: "Unknown"; readonly txHash: Option.Option<Hex> }

export interface SignedPayment {
  readonly payload: PaymentPayload
  readonly authorization: Authorization
  readonly signature: Hex
}

export class Settlement extends Context.Tag("morsel/x402/Settlement")<
  Settlement,
  {
    readonly kind: "self" | "facilitator"
    /** First submission of a claimed payment; moves its record to `submitted` (hash recorded before broadcast). */
    readonly submit: (
      record: PaymentRecord,
      payment: SignedPayment,
      requirements: PaymentRequirements
    ) => Effect.Effect<Submission, SqlError.SqlError>
    /** Send again a submitted payment whose transfer is not on chain and is still valid. */
    readonly resend: (
      record: PaymentRecord,
      payment: Option.Option<SignedPayment>,
      requirements: PaymentRequirements
    ) => Effect.Effect<Submission, SqlError.SqlError>
  }
>() {}

/** The token's own words for why a transfer would fail, without the calldata viem appends. */
export const revertReason = (e: unknown): string => {
  const text = e instanceof BaseError ? `${e.shortMessage}\n${e.details ?? ""}` : e instanceof Error ? e.message : String(e)
  const match = /reverted with (?:the following )?reason:?\s*\n?\s*([^\n]+)/i.exec(text) ?? /revert(?:ed)?:?\s*([^\n]+)/i.exec(text)
  return (match?.[1] ?? text.split("\n")[0] ?? "transfer would fail").trim().replace(/\.$/, "")
}

/** Calldata of the token's transferWithAuthorization: (v, r, s) for a 65-byte signature, else the bytes overload. */
export const transferCalldata = (a: Authorization, signature: Hex): Hex => {
  const head = [getAddress(a.from), getAddress(a.to), BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce] as const
  if (size(signature) === 65) {
    const { r, s, v, yParity } = parseSignature(signature)
    const vByte = v !== undefined ? Number(v) : yParity + 27
    return encodeFunctionData({ abi: eip3009Abi, functionName: "transferWithAuthorization", args: [...head, vByte, r, s] })
  }
  return encodeFunctionData({ abi: eip3009Abi, functionName: "transferWithAuthorization", args: [...head, signature] })
}

/** Self-settlement: our wallet (X402_SETTLER_PRIVATE_KEY) pays gas and submits the payer's authorization itself. */
export const SelfSettlement = Layer.effect(
  Settlement,
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const chain = yield* EvmChain
    const store = yield* PaymentStore
    const key = yield* Option.match(settings.x402.settlerPrivateKey, {
      onNone: () => Effect.dieMessage("self-settlement needs X402_SETTLER_PRIVATE_KEY"),
      onSome: Effect.succeed
    })
    const account = privateKeyToAccount(Redacted.value(key))
    const wallet = createWalletClient({
      account,
      chain: paymentChain(settings.x402.rpcUrl),
      transport: http(settings.x402.rpcUrl, { retryCount: 1, timeout: 10_000 })
    })
    // One submission at a time: transactions from one wallet need consecutive nonces.
    const lock = yield* Effect.makeSemaphore(1)
    const nextNonce = yield* Ref.make(Option.none<number>())

    const rpc = <A>(operation: string, f: () => Promise<A>) =>
      Effect.tryPromise({ try: f, catch: (cause) => new ChainUnavailable({ operation, cause }) })

    const simulate = (asset: Address, data: Hex) =>
      Effect.tryPromise({ try: () => chain.client.call({ account: account.address, to: asset, data }), catch: (e) => e }).pipe(
        Effect.asVoid,
        Effect.mapError((e) =>
          e instanceof BaseError && /revert/i.test(`${e.shortMessage} ${e.details ?? ""}`)
            ? ({ _tag: "Rejected", reason: revertReason(e) } as const)
            : ({ _tag: "NotSent", reason: new ChainUnavailable({ operation: "transfer simulation", cause: e }).message } as const)
        )
      )

    /** Signs the transfer with the next nonce; the caller holds the lock. */
    const sign = (asset: Address, data: Hex) =>
      Effect.gen(function* () {
        const known = yield* Ref.get(nextNonce)
        const onChain = yield* rpc("nonce lookup", () => chain.client.getTransactionCount({ address: account.address, blockTag: "pending" }))
        const nonce = Option.match(known, { onNone: () => onChain, onSome: (n) => Math.max(n, onChain) })
        const request = yield* rpc("transaction preparation", () =>
          wallet.prepareTransactionRequest({ to: asset, data, nonce, chain: wallet.chain, account })
        )
        const raw = yield* rpc("transaction signing", () => wallet.signTransaction(request))
        return { raw, hash: keccak256(raw), nonce }
      })

    const broadcast = (raw: Hex, nonce: number) =>
      rpc("broadcast", () => wallet.sendRawTransaction({ serializedTransaction: raw })).pipe(
        Effect.zipRight(Ref.set(nextNonce, Option.some(nonce + 1))),
        Effect.tapError((e) =>
          // The nonce may be off (another sender, a dropped transaction): read it from the chain next time.
          Ref.set(nextNonce, Option.none()).pipe(Effect.zipRight(Effect.logWarning("x402 settlement broadcast failed", e.message)))
        )
      )

    const submit = (record: PaymentRecord, payment: SignedPayment): Effect.Effect<Submission, SqlError.SqlError> =>
      Effect.gen(function* () {
        const asset = getAddress(record.asset)
        const data = transferCalldata(payment.authorization, payment.signature)
        const simulated = yield* Effect.either(simulate(asset, data))
        if (simulated._tag === "Left") return simulated.left
        return yield* lock.withPermits(1)(
          Effect.gen(function* () {
            // Another attempt of this request may have submitted while this one waited for the lock.
            const now = yield* store.get(record.requestId)
            if (Option.isNone(now) || now.value.state !== "claimed") return { _tag: "Lost" } satisfies Submission
            const prepared = yield* Effect.either(sign(asset, data))
            if (prepared._tag === "Left") return { _tag: "NotSent", reason: prepared.left.message } satisfies Submission
            const tx = prepared.right
            // The hash is durable before the transaction exists anywhere else: a crash after this line is reconcilable.
            const won = yield* store.markSubmitted(record.requestId, {
              by: "self",
              txHash: Option.some(tx.hash),
              rawTransaction: Option.some(tx.raw)
            })
            if (Option.isNone(won)) return { _tag: "Lost" } satisfies Submission
            yield* Effect.ignore(broadcast(tx.raw, tx.nonce))
            return { _tag: "Broadcast", txHash: tx.hash } satisfies Submission
          })
        )
      })

    const resend = (record: PaymentRecord, payment: Option.Option<SignedPayment>): Effect.Effect<Submission, SqlError.SqlError> =>
      Effect.gen(function* () {
        const asset = getAddress(record.asset)
        const data = Option.match(record.rawTransaction, {
          onSome: (raw) => Option.fromNullable(parseTransaction(raw).data),
          onNone: () => Option.map(payment, (p) => transferCalldata(p.authorization, p.signature))
        })
        if (Option.isNone(data)) return { _tag: "NotSent", reason: "the signed transfer is no longer available" } satisfies Submission
        if (Option.isSome(record.txHash) && Option.isSome(record.rawTransaction)) {
          const hash = record.txHash.value
          const raw = record.rawTransaction.value
          const known = yield* Effect.either(chain.knows(hash))
          const mined = yield* Effect.either(chain.receipt(hash))
          const waiting = known._tag === "Right" && known.right && mined._tag === "Right" && Option.isNone(mined.right)
          // Still in the node's mempool: it needs time, not a second transaction.
          if (waiting) return { _tag: "Broadcast", txHash: hash } satisfies Submission
          const reverted = mined._tag === "Right" && Option.isSome(mined.right)
          if (!reverted) {
            const again = yield* Effect.either(rpc("rebroadcast", () => wallet.sendRawTransaction({ serializedTransaction: raw })))
            if (again._tag === "Right") return { _tag: "Broadcast", txHash: hash } satisfies Submission
          }
        }
        // The old transaction cannot be sent again (its nonce was taken, its fee went stale): sign a fresh one.
        const simulated = yield* Effect.either(simulate(asset, data.value))
        if (simulated._tag === "Left") return simulated.left
        return yield* lock.withPermits(1)(
          Effect.gen(function* () {
            const signed = yield* Effect.either(sign(asset, data.value))
            if (signed._tag === "Left") return { _tag: "NotSent", reason: signed.left.message } satisfies Submission
            const tx = signed.right
            yield* store.recordTransaction(record.requestId, { txHash: tx.hash, rawTransaction: Option.some(tx.raw) })
            yield* Effect.ignore(broadcast(tx.raw, tx.nonce))
            return { _tag: "Broadcast", txHash: tx.hash } satisfies Submission
          })
        )
      })

    return {
      kind: "self" as const,
      submit: (record, payment) => submit(record, payment),
      resend: (record, payment) => resend(record, payment)
    }
  })
)

/** Settlement through an x402 facilitator's /settle (X402_FACILITATOR_URL). */
export const FacilitatorSettlement = Layer.effect(
  Settlement,
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const store = yield* PaymentStore
    const url = yield* Option.match(settings.x402.facilitatorUrl, {
      onNone: () => Effect.dieMessage("facilitator settlement needs X402_FACILITATOR_URL"),
      onSome: Effect.succeed
    })
    // The facilitator waits for the receipt; past our confirmation bound its answer is unknown, not failed.
    const facilitator = new HTTPFacilitatorClient({ url, timeoutMs: settings.x402.confirmTimeoutMs })

    const record = (requestId: string, hash: Hex) =>
      store.recordTransaction(requestId, { txHash: hash, rawTransaction: Option.none() })

    const settleOnce = (requestId: string, payload: PaymentPayload, requirements: PaymentRequirements) =>
      Effect.gen(function* () {
        const answer = yield* Effect.either(Effect.tryPromise({ try: () => facilitator.settle(payload, requirements), catch: (e) => e }))
        let r: SettleResponse | SettleError
        if (answer._tag === "Right") r = answer.right
        else if (answer.left instanceof SettleError) r = answer.left
        else {
          const e = answer.left
          yield* Effect.logWarning("x402 facilitator /settle gave no answer", e instanceof Error ? e.message : String(e))
          return { _tag: "Unknown", txHash: Option.none() } satisfies Submission
        }
        const hash = txHash(r.transaction)
        if (r instanceof SettleError || !r.success) {
          const reason = r.errorReason ?? "settlement refused by the facilitator"
          if (r.errorReason === "settlement_pending") {
            if (Option.isNone(hash)) return { _tag: "Unknown", txHash: Option.none() } satisfies Submission
            yield* record(requestId, hash.value)
            return { _tag: "Broadcast", txHash: hash.value } satisfies Submission
          }
          // Only a refusal before anything was sent is final; a facilitator whose own send failed or timed out
          // answers with an error and no hash although its transfer may still be mined.
          if (Option.isNone(hash) && refusedBeforeBroadcast(reason)) return { _tag: "Rejected", reason } satisfies Submission
          // A reverted transaction of its own is not ours to follow: the chain's record of the authorization decides.
          yield* Effect.logWarning("x402 facilitator settlement failed; its transfer may still land", reason)
          return { _tag: "Unknown", txHash: Option.none() } satisfies Submission
        }
        if (Option.isNone(hash)) return { _tag: "Unknown", txHash: Option.none() } satisfies Submission
        yield* record(requestId, hash.value)
        return { _tag: "Confirmed", txHash: hash.value } satisfies Submission
      })

    return {
      kind: "facilitator" as const,
      submit: (record, payment, requirements) =>
        Effect.gen(function* () {
          // The signed authorization stays stored from the claim on (SPEC §4.2: persisted for recovery).
          const won = yield* store.markSubmitted(record.requestId, { by: "facilitator", txHash: Option.none(), rawTransaction: Option.none() })
          if (Option.isNone(won)) return { _tag: "Lost" } satisfies Submission
          return yield* settleOnce(record.requestId, payment.payload, requirements)
        }),
      resend: (record, payment, requirements) =>
        Option.match(Option.orElse(Option.map(payment, (p) => p.payload), () => decodeStored(record)), {
          onNone: () => Effect.succeed({ _tag: "NotSent", reason: "the signed authorization is no longer available" } satisfies Submission),
          onSome: (payload) => settleOnce(record.requestId, payload, requirements)
        })
    }
  })
)

/**
 * Reasons the exact-EVM facilitator gives only from its verification, before it sends anything. Anything else
 * (invalid_exact_evm_transaction_failed is also what a timed-out send becomes) may follow a broadcast.
 */
const PRE_BROADCAST_REASONS: ReadonlySet<string> = new Set([
  "invalid_exact_evm_scheme",
  "invalid_exact_evm_network_mismatch",
  "invalid_exact_evm_missing_eip712_domain",
  "invalid_exact_evm_recipient_mismatch",
  "invalid_exact_evm_signature",
  "invalid_exact_evm_payload_authorization_valid_before",
  "invalid_exact_evm_payload_authorization_valid_after",
  "invalid_exact_evm_authorization_value",
  "invalid_exact_evm_payload_authorization_value_mismatch",
  "invalid_exact_evm_token_name_mismatch",
  "invalid_exact_evm_token_version_mismatch",
  "invalid_exact_evm_eip3009_not_supported",
  "invalid_exact_evm_insufficient_balance",
  "invalid_exact_evm_transaction_simulation_failed",
  "invalid_exact_evm_failed_to_parse_signature",
  "unsupported_payload_type",
  "eip6492_factory_not_allowed"
])

export const refusedBeforeBroadcast = (reason: string): boolean => PRE_BROADCAST_REASONS.has(reason)

const txHash = (s: string | undefined): Option.Option<Hex> =>
  s !== undefined && isHex(s) && s.length === 66 ? Option.some(s) : Option.none()

const decodeStored = (record: PaymentRecord): Option.Option<PaymentPayload> =>
  Option.flatMap(record.paymentPayload, (b64) => {
    try {
      const parsed: PaymentPayload = JSON.parse(Buffer.from(b64, "base64").toString("utf8"))
      return Option.some(parsed)
    } catch {
      return Option.none()
    }
  })
