/** The chain seam on the memory chain: x402's exact-EVM verification, settlement and chain reads without a node or a gas wallet. */
import type { SqlError } from "@effect/sql"
import { encodePaymentSignatureHeader } from "@x402/core/http"
import type { PaymentPayload, PaymentRequirements, VerifyResponse } from "@x402/core/types"
import { Effect, Either, Layer, Option } from "effect"
import { createPublicClient, getAddress, type Hex, http, isAddressEqual } from "viem"
import { EvmChain, paymentChain } from "./EvmChain.ts"
import { MemoryChain } from "./MemoryChain.ts"
import { PaymentStore, type PaymentRecord } from "./PaymentStore.ts"
import { type Authorization, authorizationSigner, decodePayment, NETWORK, TOKEN_DOMAIN } from "./protocol.ts"
import { Settlement, type SignedPayment, Submission } from "./Settlement.ts"
import { Verifier } from "./Verifier.ts"

/** x402's verdict on a payment, in its order of checks: terms first, then what the token would say (nonce, balance). */
const verdict = (chain: MemoryChain["Type"], payload: PaymentPayload, requirements: PaymentRequirements): Effect.Effect<VerifyResponse> =>
  Effect.gen(function* () {
    // The EIP-3009 authorization read exactly as identify reads it from PAYMENT-SIGNATURE.
    const decoded = decodePayment(encodePaymentSignatureHeader(payload))
    const payer = decoded._tag === "Right" ? decoded.right.authorization.from : undefined
    const invalid = (invalidReason: string): VerifyResponse => ({ isValid: false, invalidReason, ...(payer ? { payer } : {}) })
    if (payload.accepted.scheme !== "exact" || requirements.scheme !== "exact") return invalid("invalid_exact_evm_scheme")
    if (typeof requirements.extra?.["name"] !== "string" || typeof requirements.extra["version"] !== "string") {
      return invalid("invalid_exact_evm_missing_eip712_domain")
    }
    if (payload.accepted.network !== requirements.network || requirements.network !== NETWORK) return invalid("invalid_exact_evm_network_mismatch")
    if (decoded._tag === "Left") return invalid("unsupported_payload_type")
    const { authorization: a, signature } = decoded.right
    if (!isAddressEqual(getAddress(requirements.asset), chain.asset)) return invalid("asset_not_deployed_contract")
    if (requirements.extra["name"] !== TOKEN_DOMAIN.name) return invalid("invalid_exact_evm_token_name_mismatch")
    if (requirements.extra["version"] !== TOKEN_DOMAIN.version) return invalid("invalid_exact_evm_token_version_mismatch")
    const signer = yield* Effect.option(authorizationSigner(chain.asset, a, signature))
    if (Option.isNone(signer) || !isAddressEqual(signer.value, a.from)) return invalid("invalid_exact_evm_signature")
    if (!isAddressEqual(a.to, getAddress(requirements.payTo))) return invalid("invalid_exact_evm_recipient_mismatch")
    const { timestamp } = yield* chain.head
    // x402 wants a few seconds of validity left, so the transfer is not mined past validBefore.
    if (BigInt(a.validBefore) < timestamp + 6n) return invalid("invalid_exact_evm_payload_authorization_valid_before")
    if (BigInt(a.validAfter) > timestamp) return invalid("invalid_exact_evm_payload_authorization_valid_after")
    if (BigInt(a.value) !== BigInt(requirements.amount)) return invalid("invalid_exact_evm_payload_authorization_value_mismatch")
    if (Option.isNone(yield* chain.simulate(a, signature))) return { isValid: true, payer: a.from }
    if (yield* chain.authorizationUsed(a.from, a.nonce)) return invalid("invalid_exact_evm_nonce_already_used")
    if ((yield* chain.balanceOf(a.from)) < BigInt(requirements.amount)) return invalid("invalid_exact_evm_insufficient_balance")
    return invalid("invalid_exact_evm_transaction_simulation_failed")
  })

const VerifierMemory = Layer.effect(
  Verifier,
  Effect.map(MemoryChain, (chain) => ({ verify: (payload, requirements) => verdict(chain, payload, requirements) }))
)

/** Settlement as self-settlement does it: the hash recorded before the transaction is sent, one submission per claim. */
const SettlementMemory = Layer.effect(
  Settlement,
  Effect.gen(function* () {
    const chain = yield* MemoryChain
    const store = yield* PaymentStore
    // One submission at a time, as one gas wallet would.
    const lock = yield* Effect.makeSemaphore(1)

    const rejected = (a: Authorization, signature: Hex) =>
      Effect.map(chain.simulate(a, signature), Option.map((reason) => Submission.Rejected({ reason })))

    const submit = (record: PaymentRecord, payment: SignedPayment): Effect.Effect<Submission, SqlError.SqlError> =>
      Effect.gen(function* () {
        const refused = yield* rejected(payment.authorization, payment.signature)
        if (Option.isSome(refused)) return refused.value
        return yield* lock.withPermits(1)(
          Effect.gen(function* () {
            const now = yield* store.get(record.requestId)
            if (Option.isNone(now) || now.value.state !== "claimed") return Submission.Lost()
            const tx = yield* chain.prepare(payment.authorization)
            const won = yield* store.markSubmitted(record.requestId, { by: "self", txHash: Option.some(tx.hash), rawTransaction: Option.none() })
            if (Option.isNone(won)) return Submission.Lost()
            yield* tx.send
            return Submission.Broadcast({ txHash: tx.hash })
          })
        )
      })

    const resend = (record: PaymentRecord, payment: Option.Option<SignedPayment>): Effect.Effect<Submission, SqlError.SqlError> =>
      Effect.gen(function* () {
        if (Option.isSome(record.txHash)) {
          const hash = record.txHash.value
          const known = yield* chain.rebroadcast(hash)
          const mined = yield* chain.receipt(hash)
          if (known && (Option.isNone(mined) || mined.value.status === "success")) return Submission.Broadcast({ txHash: hash })
        }
        // Reverted or unknown to the node: a fresh transaction from the signed payment.
        const signed = Option.orElse(payment, () => Option.flatMap(record.paymentPayload, (p) => Either.getRight(decodePayment(p))))
        if (Option.isNone(signed)) return Submission.NotSent({ reason: "the signed transfer is no longer available" })
        const refused = yield* rejected(signed.value.authorization, signed.value.signature)
        if (Option.isSome(refused)) return refused.value
        return yield* lock.withPermits(1)(
          Effect.gen(function* () {
            const tx = yield* chain.prepare(signed.value.authorization)
            yield* store.recordTransaction(record.requestId, { txHash: tx.hash, rawTransaction: Option.none() })
            yield* tx.send
            return Submission.Broadcast({ txHash: tx.hash })
          })
        )
      })

    return { kind: "self" as const, submit: (record, payment) => submit(record, payment), resend: (record, payment) => resend(record, payment) }
  })
)

/** The memory chain has no JSON-RPC endpoint: a client for the type's sake, which refuses every call. */
const noNode = (() => {
  const url = "http://memory-chain.invalid"
  return createPublicClient({
    chain: paymentChain(url),
    transport: http(url, { retryCount: 0, fetchFn: () => Promise.reject(new Error("the memory chain has no JSON-RPC endpoint")) })
  })
})()

const EvmChainMemory = Layer.effect(
  EvmChain,
  Effect.map(MemoryChain, (chain) => ({
    client: noNode,
    receipt: chain.receipt,
    knows: chain.knows,
    authorizationUsed: (asset, authorizer, nonce, blockNumber) =>
      isAddressEqual(asset, chain.asset) ? chain.authorizationUsed(authorizer, nonce, blockNumber) : Effect.succeed(false),
    authorizationSpentBy: (asset, authorizer, nonce) =>
      isAddressEqual(asset, chain.asset)
        ? Effect.map(chain.usedBy(authorizer, nonce), Option.map((txHash) => ({ kind: "used" as const, txHash })))
        : Effect.succeedNone,
    latestBlock: chain.head,
    hasCode: (address) => Effect.succeed(isAddressEqual(address, chain.asset))
  }))
)

/**
 * Verifier, Settlement and EvmChain on the memory chain (provide MemoryChain): signatures recovered for real,
 * the token's rules applied to an in-memory ledger, receipts whose `transaction` is a 32-byte hash.
 */
export const ChainMemory = Layer.mergeAll(VerifierMemory, SettlementMemory, EvmChainMemory)
