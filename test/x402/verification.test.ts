import type { PaymentPayload, PaymentRequirements } from "@x402/core/types"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { X402Funding } from "../../src/x402/X402Funding.ts"
import { TestChain } from "../support/memoryChain.ts"
import { challenge, decodeChallengeHeader, refusal, X402MemoryTest } from "./layer.ts"
import { authorizationOf, header, PUBLIC_BASE_URL, signPayment, withBrokenSignature } from "../support/x402.ts"
import { newRequestId, paymentCredential } from "../support/funding.ts"

/** Signs with `account` for the current challenge, the terms altered by `alter`. */
const sign = (account: (chain: TestChain["Type"]) => PrivateKeyAccount, alter?: (r: PaymentRequirements) => PaymentRequirements) =>
  Effect.gen(function* () {
    const chain = yield* TestChain
    const terms = yield* challenge
    return yield* Effect.promise(() => signPayment(account(chain), terms, alter))
  })

const payer0 = (chain: TestChain["Type"]) => chain.accounts.payers[0]!

/** Tries to reserve with the payment: the answer, the headers it set, and what the chain saw afterwards. */
const attempt = (payload: PaymentPayload | string) =>
  Effect.gen(function* () {
    const chain = yield* TestChain
    const x402 = yield* X402Funding
    const value = typeof payload === "string" ? payload : header(payload)
    const { error, headers } = yield* refusal(Effect.flatMap(x402.identify(paymentCredential(value)), (m) => m.reserve(newRequestId())))
    const transfers = yield* Effect.promise(() => chain.transfers(chain.accounts.payers[0]!.address, chain.accounts.payTo.address))
    return { error: error as { _tag: string; error: { code: string; message: string }; payment_required?: { accepts: ReadonlyArray<unknown> } }, headers, transfers }
  })

// The subject is what morsel refuses and answers, not the chain: the memory chain stands in for it.
describe("x402 verification before any work", () => {
  layer(X402MemoryTest(), { excludeTestServices: true })("refused payments", (it) => {
    const refusedWith = (payload: Effect.Effect<PaymentPayload | string, never, TestChain | X402Funding>, reason: RegExp) =>
      Effect.gen(function* () {
        const { error, headers, transfers } = yield* attempt(yield* payload)
        expect(error._tag).toBe("PaymentRequired")
        expect(error.error.code).toBe("invalid_payment")
        expect(error.error.message).toMatch(reason)
        // A fresh challenge comes with every refusal, in the body and in PAYMENT-REQUIRED.
        expect(error.payment_required?.accepts).toHaveLength(1)
        const fresh = decodeChallengeHeader(headers)
        expect(fresh?.resource.url).toBe(`${PUBLIC_BASE_URL}/v1/analyze`)
        expect(fresh?.accepts).toEqual(error.payment_required?.accepts)
        // Nothing moved.
        expect(transfers).toEqual([])
        return error
      })

    it.effect("expired authorization", () =>
      refusedWith(
        sign(payer0, (r) => ({ ...r, maxTimeoutSeconds: 1 })),
        /expired.*invalid_exact_evm_payload_authorization_valid_before/
      ))

    it.effect("an authorization that would expire before the analysis is done and paid", () =>
      refusedWith(
        sign(payer0, (r) => ({ ...r, maxTimeoutSeconds: 60 })),
        /expires too soon: it must stay valid for at least \d+ seconds/
      ))

    // validBefore = now + maxTimeoutSeconds: the challenge offers 600 s, a margin of 60 s covers clock skew.
    for (const [what, seconds] of [
      ["an hour", 3600],
      ["beyond 64 bits", 2 ** 65]
    ] as const) {
      it.effect(`an authorization valid for ${what} is refused before anything is stored`, () =>
        Effect.gen(function* () {
          const payload = yield* sign(payer0, (r) => ({ ...r, maxTimeoutSeconds: seconds }))
          yield* refusedWith(Effect.succeed(payload), /valid for too long: validBefore may be at most 660 seconds ahead/)
          const sql = yield* SqlClient.SqlClient
          const stored = yield* sql`SELECT 1 FROM x402_payments WHERE auth_nonce = ${authorizationOf(payload).nonce}`.pipe(Effect.orDie)
          expect(stored).toEqual([])
        }))
    }

    it.effect("under-funded wallet", () =>
      refusedWith(
        sign((c) => c.accounts.pauper),
        /less than the price.*invalid_exact_evm_insufficient_balance/
      ))

    it.effect("wrong payTo", () =>
      Effect.gen(function* () {
        const chain = yield* TestChain
        yield* refusedWith(
          sign(payer0, (r) => ({ ...r, payTo: chain.accounts.payers[1]!.address })),
          /another address than the challenge's payTo.*recipient_mismatch/
        )
      }))

    it.effect("wrong amount", () =>
      refusedWith(
        sign(payer0, (r) => ({ ...r, amount: "9999" })),
        /not exactly the price.*value_mismatch/
      ))

    it.effect("wrong network", () =>
      refusedWith(
        sign(payer0, (r) => ({ ...r, network: "eip155:84532" })),
        /another network than eip155:8453.*network_mismatch/
      ))

    it.effect("bad signature", () =>
      refusedWith(
        Effect.map(sign(payer0), withBrokenSignature),
        /signature does not match.*invalid_exact_evm_signature/
      ))

    it.effect("the wrong token domain (\"USDC\" instead of \"USD Coin\")", () =>
      refusedWith(
        sign(payer0, (r) => ({ ...r, extra: { name: "USDC", version: "2" } })),
        /invalid_exact_evm_signature/
      ))

    it.effect("undecodable PAYMENT-SIGNATURE", () => refusedWith(Effect.succeed("not base64 at all!"), /not base64-encoded JSON/))

    it.effect("an x402 v1 payment", () =>
      refusedWith(
        Effect.succeed(Buffer.from(JSON.stringify({ x402Version: 1, scheme: "exact", network: "base", payload: {} })).toString("base64")),
        /not an x402 payment payload|version 1 is not supported/
      ))

    it.effect("an authorization that names another wallet than its signer is refused before that wallet is trusted", () =>
      Effect.gen(function* () {
        const chain = yield* TestChain
        const x402 = yield* X402Funding
        const good = yield* sign(payer0)
        const victim = chain.accounts.payers[1]!.address
        const forged: PaymentPayload = {
          ...good,
          payload: { ...good.payload, authorization: { ...(good.payload["authorization"] as object), from: victim } }
        }
        // identify alone refuses it: the victim's wallet never becomes an idempotency scope or a limits subject.
        const { error, headers } = yield* refusal(x402.identify(paymentCredential(header(forged))))
        expect(error).toMatchObject({ _tag: "PaymentRequired", error: { code: "invalid_payment" } })
        expect((error as { error: { message: string } }).error.message).toMatch(/invalid_exact_evm_signature/)
        expect(decodeChallengeHeader(headers)?.accepts).toHaveLength(1)
        // The genuine one is identified as its signer's.
        const method = yield* x402.identify(paymentCredential(header(good)))
        expect(method.payer.id).toBe(`wallet:${chain.accounts.payers[0]!.address.toLowerCase()}`)
      }))

    it.effect("a refused authorization is not recorded: the payer may fix nothing and try the valid one next", () =>
      Effect.gen(function* () {
        const chain = yield* TestChain
        const x402 = yield* X402Funding
        const good = yield* sign(payer0)
        yield* attempt(withBrokenSignature(good))
        // The valid authorization with the same nonce is still free and unused on chain.
        const { nonce, from } = authorizationOf(good)
        expect(yield* Effect.promise(() => chain.authorizationUsed(from, nonce))).toBe(false)
        const method = yield* x402.identify(paymentCredential(header(good)))
        const reservation = yield* method.reserve(newRequestId())
        yield* reservation.release
      }))
  })
})
