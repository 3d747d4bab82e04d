// One behavioural suite for the chain seam, run against the memory chain and against the local hardhat chain with self-settlement.
import { randomBytes } from "node:crypto"
import { decodePaymentResponseHeader } from "@x402/core/http"
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types"
import { authorizationTypes } from "@x402/evm"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { getAddress, type Hex, toHex } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { ChainMemory } from "../../src/x402/ChainMemory.ts"
import { PaymentStoreLive } from "../../src/x402/PaymentStore.ts"
import { CHAIN_ID, TOKEN_DOMAIN } from "../../src/x402/protocol.ts"
import { Verifier } from "../../src/x402/Verifier.ts"
import { ChainFromSettings, type X402Funding } from "../../src/x402/X402Funding.ts"
import { TestChain } from "../support/memoryChain.ts"
import { challenge, refusal, X402MemoryTest, X402Test } from "./layer.ts"
import { reserveAndCommit, retry } from "./chainSteps.ts"
import { newRequestId } from "../support/funding.ts"
import { signPayment, withBrokenSignature } from "../support/x402.ts"

const PRICE = 10_000n

/** Each chain with its own seam exposed beside the x402 services, so the verifier's verdicts can be read too. */
const chains: ReadonlyArray<readonly [string, Layer.Layer<Verifier | X402Funding | TestChain>]> = [
  ["memory chain", ChainMemory.pipe(Layer.provide(PaymentStoreLive), Layer.provideMerge(X402MemoryTest()))],
  ["local chain, self-settlement", ChainFromSettings.pipe(Layer.provide(PaymentStoreLive), Layer.provideMerge(X402Test()), Layer.orDie)]
]

const payer = (i: number) => Effect.map(TestChain, (chain) => chain.accounts.payers[i]!)
const chainDo = <A>(f: (chain: TestChain["Type"]) => Promise<A>) => Effect.flatMap(TestChain, (chain) => Effect.promise(() => f(chain)))
const transfersFrom = (account: PrivateKeyAccount) => chainDo((c) => c.transfers(account.address, c.accounts.payTo.address))

/** The official client's payment for the current challenge, its terms altered by `alter`. */
const sign = (account: PrivateKeyAccount, alter?: (r: PaymentRequirements) => PaymentRequirements) =>
  Effect.flatMap(challenge, (terms) => Effect.promise(() => signPayment(account, terms, alter)))

/** A payment signed by hand with the given window (the official client always signs one that is open now). */
const signWindow = (account: PrivateKeyAccount, window: { readonly validAfter: bigint; readonly validBefore: bigint }) =>
  Effect.gen(function* () {
    const terms = yield* challenge
    const accepted = terms.accepts[0]!
    const authorization = {
      from: account.address,
      to: getAddress(accepted.payTo),
      value: accepted.amount,
      validAfter: window.validAfter.toString(),
      validBefore: window.validBefore.toString(),
      nonce: toHex(randomBytes(32))
    }
    const signature = yield* Effect.promise(() =>
      account.signTypedData({
        domain: { ...TOKEN_DOMAIN, chainId: CHAIN_ID, verifyingContract: getAddress(accepted.asset) },
        types: authorizationTypes,
        primaryType: "TransferWithAuthorization",
        message: { ...authorization, value: BigInt(authorization.value), validAfter: window.validAfter, validBefore: window.validBefore, nonce: authorization.nonce }
      })
    )
    return { x402Version: 2, resource: terms.resource, accepted, payload: { authorization, signature } } satisfies PaymentPayload
  })

/** The verifier's verdict on the payment against the challenge's terms. */
const verdict = (payload: PaymentPayload) =>
  Effect.gen(function* () {
    const terms = yield* challenge
    const verifier = yield* Verifier
    return yield* verifier.verify(payload, terms.accepts[0]!)
  })

const receiptOf = (paymentResponse: Option.Option<string>) => decodePaymentResponseHeader(Option.getOrThrow(paymentResponse))
const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000))

for (const [name, chainLayer] of chains) {
  describe(`the chain seam on the ${name}`, () => {
    layer(chainLayer, { excludeTestServices: true })("payments", (it) => {
      it.effect("a valid payment settles: exactly 10000 moves, the receipt names the transfer; the authorization cannot pay again", () =>
        Effect.gen(function* () {
          const chain = yield* TestChain
          const account = yield* payer(0)
          const before = { payer: yield* chainDo((c) => c.balanceOf(account.address)), payTo: yield* chainDo((c) => c.balanceOf(c.accounts.payTo.address)) }
          const payload = yield* sign(account)
          expect(yield* verdict(payload)).toMatchObject({ isValid: true })
          const settled = yield* reserveAndCommit(payload, newRequestId())
          const receipt = receiptOf(settled.paymentResponse)
          expect(receipt).toMatchObject({ success: true, network: "eip155:8453", payer: account.address, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) })
          expect(yield* transfersFrom(account)).toEqual([{ transactionHash: receipt.transaction, value: PRICE }])
          expect(yield* chainDo((c) => c.balanceOf(account.address))).toBe(before.payer - PRICE)
          expect(yield* chainDo((c) => c.balanceOf(chain.accounts.payTo.address))).toBe(before.payTo + PRICE)
          // Replayed for another request: refused before the chain is asked; the chain itself says the nonce is spent.
          const replay = yield* Effect.flip(reserveAndCommit(payload, newRequestId()))
          expect(replay).toMatchObject({ _tag: "Conflict", error: { code: "authorization_reused" } })
          expect(yield* verdict(payload)).toMatchObject({ isValid: false, invalidReason: "invalid_exact_evm_nonce_already_used" })
          expect(yield* transfersFrom(account)).toHaveLength(1)
        }))

      const refused = (payload: Effect.Effect<PaymentPayload, never, TestChain | X402Funding>, reason: string) =>
        Effect.gen(function* () {
          const signed = yield* payload
          const { error } = yield* refusal(reserveAndCommit(signed, newRequestId()))
          expect(error).toMatchObject({ _tag: "PaymentRequired", error: { code: "invalid_payment", message: expect.stringContaining(`(${reason})`) } })
          const from = getAddress((signed.payload["authorization"] as { from: Hex }).from)
          expect(yield* chainDo((c) => c.transfers(from, c.accounts.payTo.address))).toEqual([])
        })

      it.effect("an expired authorization", () =>
        Effect.gen(function* () {
          const account = yield* payer(1)
          yield* refused(sign(account, (r) => ({ ...r, maxTimeoutSeconds: 1 })), "invalid_exact_evm_payload_authorization_valid_before")
          const expired = yield* signWindow(account, { validAfter: 0n, validBefore: nowSeconds() - 10n })
          expect(yield* verdict(expired)).toMatchObject({ isValid: false, invalidReason: "invalid_exact_evm_payload_authorization_valid_before" })
        }))

      it.effect("an authorization not valid yet", () =>
        Effect.flatMap(payer(1), (account) =>
          refused(signWindow(account, { validAfter: nowSeconds() + 300n, validBefore: nowSeconds() + 600n }), "invalid_exact_evm_payload_authorization_valid_after")
        ))

      it.effect("a wrong amount", () =>
        Effect.flatMap(payer(1), (account) =>
          refused(sign(account, (r) => ({ ...r, amount: "9999" })), "invalid_exact_evm_payload_authorization_value_mismatch")
        ))

      it.effect("a wrong payTo", () =>
        Effect.flatMap(payer(1), (account) =>
          refused(sign(account, (r) => ({ ...r, payTo: account.address })), "invalid_exact_evm_recipient_mismatch")
        ))

      it.effect("a bad signature", () =>
        Effect.gen(function* () {
          const broken = withBrokenSignature(yield* sign(yield* payer(1)))
          yield* refused(Effect.succeed(broken), "invalid_exact_evm_signature")
          expect(yield* verdict(broken)).toMatchObject({ isValid: false, invalidReason: "invalid_exact_evm_signature" })
        }))

      it.effect("a wallet without funds", () =>
        Effect.flatMap(TestChain, (chain) => refused(sign(chain.accounts.pauper), "invalid_exact_evm_insufficient_balance")))

      it.effect("mining paused: payment_pending with the transaction's hash; mined: the identical retry settles, one transfer", () =>
        Effect.gen(function* () {
          const account = yield* payer(2)
          const payload = yield* sign(account)
          const requestId = newRequestId()
          yield* chainDo((c) => c.pauseMining())
          const pending = yield* Effect.flip(reserveAndCommit(payload, requestId))
          expect(pending).toMatchObject({
            _tag: "ServiceUnavailable",
            error: { code: "payment_pending", request_id: requestId },
            payment_response: { success: false, errorReason: "settlement_pending", transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) }
          })
          const tx = (pending as { payment_response: { transaction: string } }).payment_response.transaction
          expect(yield* transfersFrom(account)).toEqual([])
          yield* chainDo((c) => c.resumeMining())
          const settled = yield* retry(payload, requestId)
          expect(receiptOf(settled.paymentResponse)).toMatchObject({ success: true, transaction: tx })
          expect(yield* transfersFrom(account)).toEqual([{ transactionHash: tx, value: PRICE }])
        }))
    })
  })
}
