/** Submitting a claimed payment on chain: self-settlement with our own gas wallet, or through an x402 facilitator. */
import { SqlClient, type SqlError } from "@effect/sql"
import { HTTPFacilitatorClient } from "@x402/core/server"
import { type PaymentPayload, type PaymentRequirements, SettleError, type SettleResponse } from "@x402/core/types"
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
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
import type { RequestId } from "../domain/ids.ts"
import { ChainUnavailable, EvmChain, eip3009Abi, paymentChain } from "./EvmChain.ts"
import { refusedBeforeBroadcast } from "./facilitatorRefusals.ts"
import { watchSettlerBalance } from "./SettlerBalance.ts"
import { PaymentStore, type PaymentRecord } from "./PaymentStore.ts"
import type { Authorization } from "./protocol.ts"
import { type LeaseLost, makeSettlerNonces, type SettlerLease } from "./SettlerNonces.ts"

/** What one submission attempt achieved. */
export type Submission = Data.TaggedEnum<{
  /** Another attempt owns the submission of this payment. */
  // biome-ignore lint/complexity/noBannedTypes: Data.TaggedEnum spells a variant without fields as {}
  Lost: {}
  /** Nothing was sent: the chain or facilitator could not be reached; the payment may be submitted later. */
  NotSent: { readonly reason: string }
  /** The transfer would fail (or a facilitator refused it before sending anything); nothing was sent by this attempt. */
  Rejected: { readonly reason: string }
  /** Sent; its receipt decides. */
  Broadcast: { readonly txHash: Hex }
  /** A facilitator saw the transfer mined. */
  Confirmed: { readonly txHash: Hex }
  /** Maybe sent: whether and where it landed is unknown (a facilitator timed out, or failed after it may have broadcast). */
  Unknown: { readonly txHash: Option.Option<Hex> }
}>
export const Submission = Data.taggedEnum<Submission>()

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

/**
 * Self-settlement: our wallet (X402_SETTLER_PRIVATE_KEY) pays gas and submits the payer's authorization itself.
 * Several instances may share the wallet: nonces are chosen under its lease in PostgreSQL (SettlerNonces).
 */
export const SettlementSelf = Layer.scoped(
  Settlement,
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const chain = yield* EvmChain
    const store = yield* PaymentStore
    const sql = yield* SqlClient.SqlClient
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
    const nonces = yield* makeSettlerNonces(account.address)
    yield* watchSettlerBalance(account.address)

    const rpc = <A>(operation: string, f: () => Promise<A>) =>
      Effect.tryPromise({ try: f, catch: (cause) => new ChainUnavailable({ operation, cause }) })

    const simulate = (asset: Address, data: Hex) =>
      Effect.tryPromise({ try: () => chain.client.call({ account: account.address, to: asset, data }), catch: (e) => e }).pipe(
        Effect.asVoid,
        Effect.mapError((e) =>
          e instanceof BaseError && /revert/i.test(`${e.shortMessage} ${e.details ?? ""}`)
            ? Submission.Rejected({ reason: revertReason(e) })
            : Submission.NotSent({ reason: new ChainUnavailable({ operation: "transfer simulation", cause: e }).message })
        )
      )

    const broadcast = (raw: Hex) =>
      rpc("broadcast", () => wallet.sendRawTransaction({ serializedTransaction: raw })).pipe(
        Effect.tapError((e) => Effect.logWarning("x402 settlement broadcast failed", e.message)),
        Effect.ignore
      )

    /**
     * Signs `call` at `nonce`, saves it with the payment (`save` answers false when another attempt won) and records
     * the nonce while the lease holds, all before the transaction exists anywhere else; then broadcasts it.
     */
    const sendAt = (
      lease: SettlerLease,
      nonce: number,
      call: Call,
      requestId: Option.Option<RequestId>,
      save: (txHash: Hex, raw: Hex) => Effect.Effect<boolean, SqlError.SqlError>
    ) =>
      Effect.gen(function* () {
        const request = yield* rpc("transaction preparation", () =>
          wallet.prepareTransactionRequest({ ...call, nonce, chain: wallet.chain, account })
        )
        const raw = yield* rpc("transaction signing", () => wallet.signTransaction(request))
        const txHash = keccak256(raw)
        const saved = yield* sql.withTransaction(
          Effect.gen(function* () {
            if (!(yield* save(txHash, raw))) return false
            yield* lease.record(nonce, txHash, requestId)
            return true
          })
        )
        if (!saved) return Submission.Lost()
        yield* broadcast(raw)
        return Submission.Broadcast({ txHash })
      })

    /** Work under the settler's lease; trouble with the chain or the lease leaves the payment for a later attempt. */
    const underLease = (work: (lease: SettlerLease) => Effect.Effect<Submission, ChainUnavailable | LeaseLost | SqlError.SqlError>) =>
      nonces.exclusive(work).pipe(
        Effect.catchTags({
          ChainUnavailable: (e) => Effect.succeed(Submission.NotSent({ reason: e.message })),
          LeaseLost: (e) => Effect.succeed(Submission.NotSent({ reason: e.message })),
          SettlerBusy: (e) => Effect.succeed(Submission.NotSent({ reason: e.message }))
        })
      )

    /** A fresh transaction carrying the transfer, at the next nonce (or the gap it fills). */
    const sendTransfer = (
      record: PaymentRecord,
      data: Hex,
      state: PaymentRecord["state"],
      save: (txHash: Hex, raw: Hex) => Effect.Effect<boolean, SqlError.SqlError>
    ) =>
      underLease((lease) =>
        Effect.gen(function* () {
          // Another attempt of this request may have sent it while this one waited for the wallet.
          const now = yield* store.get(record.requestId)
          if (Option.isNone(now) || now.value.state !== state) return Submission.Lost()
          const nonce = yield* lease.next
          return yield* sendAt(lease, nonce, { to: getAddress(record.asset), data }, Option.some(record.requestId), save)
        })
      )

    /**
     * A transaction of ours the node holds but does not mine: priced under the chain's base fee, it is signed again
     * at its nonce with higher fees; waiting behind a nonce the node lost, that gap is filled with a zero-value
     * transfer to ourselves. Answers the hash that now carries the payment.
     */
    const unstick = (record: PaymentRecord, txHash: Hex, raw: Hex) =>
      Effect.gen(function* () {
        const tx = parseTransaction(raw)
        const nonce = tx.nonce ?? 0
        const [block, pending] = yield* Effect.all(
          [
            rpc("latest block", () => chain.client.getBlock({ blockTag: "latest" })),
            rpc("pending nonce lookup", () => chain.client.getTransactionCount({ address: account.address, blockTag: "pending" }))
          ],
          { concurrency: 2 }
        )
        const baseFee = block.baseFeePerGas
        if (tx.to && tx.data && tx.maxFeePerGas !== undefined && tx.maxPriorityFeePerGas !== undefined && baseFee != null && tx.maxFeePerGas < baseFee) {
          const tip = bumped(tx.maxPriorityFeePerGas)
          const fees = { maxPriorityFeePerGas: tip, maxFeePerGas: bigMax(bumped(tx.maxFeePerGas), baseFee * 2n + tip) }
          yield* Effect.logWarning("x402 settlement transaction priced under the base fee; replacing it with higher fees", { nonce })
          const call: Call = { to: tx.to, data: tx.data, ...(tx.gas !== undefined ? { gas: tx.gas } : {}), ...fees }
          const replaced = yield* underLease((lease) =>
            sendAt(lease, nonce, call, Option.some(record.requestId), (hash, signed) =>
              store.recordTransaction(record.requestId, { txHash: hash, rawTransaction: Option.some(signed) }).pipe(Effect.as(true))
            )
          )
          return replaced._tag === "Broadcast" ? replaced.txHash : txHash
        }
        if (nonce > pending) {
          yield* underLease((lease) =>
            Effect.flatMap(lease.gap, (gap) =>
              Option.match(gap, {
                onNone: () => Effect.succeed(Submission.Lost()),
                onSome: (n) =>
                  Effect.logWarning("x402 settler nonce gap; filling it with a zero-value transfer", { nonce: n }).pipe(
                    Effect.zipRight(sendAt(lease, n, { to: account.address, value: 0n, gas: 21_000n }, Option.none(), () => Effect.succeed(true)))
                  )
              })
            )
          )
        }
        return txHash
      })

    const submit = (record: PaymentRecord, payment: SignedPayment): Effect.Effect<Submission, SqlError.SqlError> =>
      Effect.gen(function* () {
        const data = transferCalldata(payment.authorization, payment.signature)
        const simulated = yield* Effect.either(simulate(getAddress(record.asset), data))
        if (simulated._tag === "Left") return simulated.left
        return yield* sendTransfer(record, data, "claimed", (txHash, raw) =>
          // Exactly one attempt moves the claim to submitted; another may have done it while this one waited.
          store
            .markSubmitted(record.requestId, { by: "self", txHash: Option.some(txHash), rawTransaction: Option.some(raw) })
            .pipe(Effect.map(Option.isSome))
        )
      })

    const resend = (record: PaymentRecord, payment: Option.Option<SignedPayment>): Effect.Effect<Submission, SqlError.SqlError> =>
      Effect.gen(function* () {
        const asset = getAddress(record.asset)
        const data = Option.match(record.rawTransaction, {
          onSome: (raw) => Option.fromNullable(parseTransaction(raw).data),
          onNone: () => Option.map(payment, (p) => transferCalldata(p.authorization, p.signature))
        })
        if (Option.isNone(data)) return Submission.NotSent({ reason: "the signed transfer is no longer available" })
        if (Option.isSome(record.txHash) && Option.isSome(record.rawTransaction)) {
          const hash = record.txHash.value
          const raw = record.rawTransaction.value
          const known = yield* Effect.either(chain.knows(hash))
          const mined = yield* Effect.either(chain.receipt(hash))
          const waiting = known._tag === "Right" && known.right && mined._tag === "Right" && Option.isNone(mined.right)
          // Still in the node's mempool: it needs time (or a higher fee, or a filled gap below it), not a second transfer.
          if (waiting) {
            const carrier = yield* unstick(record, hash, raw).pipe(Effect.orElseSucceed(() => hash))
            return Submission.Broadcast({ txHash: carrier })
          }
          const reverted = mined._tag === "Right" && Option.isSome(mined.right)
          if (!reverted) {
            const again = yield* Effect.either(rpc("rebroadcast", () => wallet.sendRawTransaction({ serializedTransaction: raw })))
            if (again._tag === "Right") return Submission.Broadcast({ txHash: hash })
          }
        }
        // The old transaction cannot be sent again (its nonce was taken, its fee went stale): sign a fresh one.
        const simulated = yield* Effect.either(simulate(asset, data.value))
        if (simulated._tag === "Left") return simulated.left
        return yield* sendTransfer(record, data.value, "submitted", (txHash, raw) =>
          store.recordTransaction(record.requestId, { txHash, rawTransaction: Option.some(raw) }).pipe(Effect.as(true))
        )
      })

    return {
      kind: "self" as const,
      submit: (record, payment) => submit(record, payment),
      resend: (record, payment) => resend(record, payment)
    }
  })
)

/** What a settlement transaction calls: the token's transfer, or a plain value transfer that fills a nonce gap. */
type Call = {
  readonly to: Address
  readonly data?: Hex
  readonly value?: bigint
  readonly gas?: bigint
  readonly maxFeePerGas?: bigint
  readonly maxPriorityFeePerGas?: bigint
}

/** A replacement must pay at least 10% more than the transaction it replaces: 12.5% and one wei. */
const bumped = (fee: bigint) => fee + fee / 8n + 1n

const bigMax = (a: bigint, b: bigint) => (a > b ? a : b)

/** Settlement through an x402 facilitator's /settle (X402_FACILITATOR_URL). */
export const SettlementFacilitator = Layer.effect(
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

    const record = (requestId: RequestId, hash: Hex) =>
      store.recordTransaction(requestId, { txHash: hash, rawTransaction: Option.none() })

    const settleOnce = (requestId: RequestId, payload: PaymentPayload, requirements: PaymentRequirements) =>
      Effect.gen(function* () {
        const answer = yield* Effect.either(Effect.tryPromise({ try: () => facilitator.settle(payload, requirements), catch: (e) => e }))
        let r: SettleResponse | SettleError
        if (answer._tag === "Right") r = answer.right
        else if (answer.left instanceof SettleError) r = answer.left
        else {
          const e = answer.left
          yield* Effect.logWarning("x402 facilitator /settle gave no answer", e instanceof Error ? e.message : String(e))
          return Submission.Unknown({ txHash: Option.none() })
        }
        const hash = txHash(r.transaction)
        if (r instanceof SettleError || !r.success) {
          const reason = r.errorReason ?? "settlement refused by the facilitator"
          if (r.errorReason === "settlement_pending") {
            if (Option.isNone(hash)) return Submission.Unknown({ txHash: Option.none() })
            yield* record(requestId, hash.value)
            return Submission.Broadcast({ txHash: hash.value })
          }
          // Only a refusal before anything was sent is final; a facilitator whose own send failed or timed out
          // answers with an error and no hash although its transfer may still be mined.
          if (Option.isNone(hash) && refusedBeforeBroadcast(reason)) return Submission.Rejected({ reason })
          // A reverted transaction of its own is not ours to follow: the chain's record of the authorization decides.
          yield* Effect.logWarning("x402 facilitator settlement failed; its transfer may still land", reason)
          return Submission.Unknown({ txHash: Option.none() })
        }
        if (Option.isNone(hash)) return Submission.Unknown({ txHash: Option.none() })
        yield* record(requestId, hash.value)
        return Submission.Confirmed({ txHash: hash.value })
      })

    return {
      kind: "facilitator" as const,
      submit: (record, payment, requirements) =>
        Effect.gen(function* () {
          // The signed authorization stays stored from the claim on, so a retry can recover the payment.
          const won = yield* store.markSubmitted(record.requestId, { by: "facilitator", txHash: Option.none(), rawTransaction: Option.none() })
          if (Option.isNone(won)) return Submission.Lost()
          return yield* settleOnce(record.requestId, payment.payload, requirements)
        }),
      resend: (record, payment, requirements) =>
        Option.match(Option.orElse(Option.map(payment, (p) => p.payload), () => decodeStored(record)), {
          onNone: () => Effect.succeed(Submission.NotSent({ reason: "the signed authorization is no longer available" })),
          onSome: (payload) => settleOnce(record.requestId, payload, requirements)
        })
    }
  })
)

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
