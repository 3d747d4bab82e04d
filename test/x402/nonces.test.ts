import { decodePaymentResponseHeader } from "@x402/core/http"
import type { PaymentPayload, PaymentRequired as X402PaymentRequired } from "@x402/core/types"
import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Either, Layer, Option } from "effect"
import { type Hex, keccak256, parseGwei, toHex } from "viem"
import { AppConfigFromEnv } from "../../src/config.ts"
import { X402Funding, X402Layer } from "../../src/x402/X402Funding.ts"
import { Chain, type LocalChain, startChain } from "../support/chain.ts"
import { realPostgresUrl, sharedTestDatabase } from "../support/database.ts"
import { chainDo, payerAddress, reserveAndCommit, retry, signed, transfersFrom } from "./chainSteps.ts"
import { challenge, X402Test } from "./layer.ts"
import { header, signPayment, x402Env } from "../support/x402.ts"
import { newRequestId, paymentCredential, unsaved } from "../support/funding.ts"

const PRICE = 10_000n

const receiptOf = (paymentResponse: Option.Option<string>) => decodePaymentResponseHeader(Option.getOrThrow(paymentResponse))

/** The transaction a 503 payment_pending names. */
const pendingTx = (error: unknown) => {
  expect(error).toMatchObject({ _tag: "ServiceUnavailable", error: { code: "payment_pending" } })
  return (error as { payment_response: { transaction: Hex } }).payment_response.transaction
}

const settlerNonce = (chain: LocalChain, blockTag: "latest" | "pending") =>
  Effect.promise(() => chain.publicClient.getTransactionCount({ address: chain.accounts.settler.address, blockTag }))

const rpc = (method: string, params: ReadonlyArray<unknown>) =>
  chainDo((c) =>
    fetch(c.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) })
  )

describe("self-settlement nonces", () => {
  layer(X402Test(), { excludeTestServices: true })("one instance", (it) => {
    it.effect("a transaction the node dropped stalls nothing: the next payment takes its nonce, the dropped one is signed again", () =>
      Effect.gen(function* () {
        const chain = yield* Chain
        const dropped = yield* signed(0)
        const droppedRequest = newRequestId()
        yield* chainDo((c) => c.pauseMining())
        const lost = pendingTx(yield* Effect.flip(reserveAndCommit(dropped, droppedRequest)))
        yield* chainDo(async (c) => expect(await c.dropTransaction(lost)).toBe(true))
        yield* chainDo((c) => c.resumeMining())
        // Signed at the lost nonce, the next payment is mined at once instead of waiting behind the gap.
        const next = yield* reserveAndCommit(yield* signed(1), newRequestId())
        expect(yield* transfersFrom(yield* payerAddress(1))).toEqual([{ transactionHash: receiptOf(next.paymentResponse).transaction, value: PRICE }])
        // The dropped payment's retry finds its nonce taken and signs it again at a new one.
        const again = yield* retry(dropped, droppedRequest)
        expect(yield* transfersFrom(yield* payerAddress(0))).toEqual([{ transactionHash: receiptOf(again.paymentResponse).transaction, value: PRICE }])
        expect(yield* settlerNonce(chain, "pending")).toBe(yield* settlerNonce(chain, "latest"))
      }))

    it.effect("an instance that died holding the wallet, after recording a transaction it never sent, delays the next payment by its lease only", () =>
      Effect.gen(function* () {
        const chain = yield* Chain
        const sql = yield* SqlClient.SqlClient
        const settler = chain.accounts.settler.address.toLowerCase()
        const nonce = yield* settlerNonce(chain, "pending")
        yield* sql`
          INSERT INTO x402_settlers (address, held_by, held_until) VALUES (${settler}, 'vanished', now() + interval '1 second')
          ON CONFLICT (address) DO UPDATE SET held_by = 'vanished', held_until = now() + interval '1 second'`
        yield* sql`
          INSERT INTO x402_settler_transactions (address, nonce, tx_hash, signed_at)
          VALUES (${settler}, ${nonce}, ${keccak256(toHex("never broadcast"))}, now())`
        // Once the lease passes, the recorded but unsent nonce is a gap: the payment takes it and is mined at once.
        const settled = yield* reserveAndCommit(yield* signed(3), newRequestId())
        const transfers = yield* transfersFrom(yield* payerAddress(3))
        expect(transfers).toEqual([{ transactionHash: receiptOf(settled.paymentResponse).transaction, value: PRICE }])
        expect(yield* settlerNonce(chain, "latest")).toBe(nonce + 1)
      }).pipe(Effect.orDie))

    it.effect("a transaction priced under the chain's base fee is replaced with higher fees at its nonce; one transfer", () =>
      Effect.gen(function* () {
        const payload = yield* signed(2)
        const requestId = newRequestId()
        yield* chainDo((c) => c.pauseMining())
        const cheap = pendingTx(yield* Effect.flip(reserveAndCommit(payload, requestId)))
        // The base fee jumps far above the transaction's fee cap: no block takes it any more.
        yield* rpc("hardhat_setNextBlockBaseFeePerGas", [toHex(parseGwei("100"))])
        yield* chainDo((c) => c.mine())
        const replacement = pendingTx(yield* Effect.flip(retry(payload, requestId)))
        expect(replacement).not.toBe(cheap)
        yield* chainDo((c) => c.resumeMining())
        const settled = yield* retry(payload, requestId)
        expect(receiptOf(settled.paymentResponse).transaction).toBe(replacement)
        expect(yield* transfersFrom(yield* payerAddress(2))).toEqual([{ transactionHash: replacement, value: PRICE }])
      }))
  })

  layer(X402Test(), { excludeTestServices: true })("a dropped transaction that can no longer be sent", (it) => {
    it.effect("the payment queued behind its nonce is released by a zero-value transfer that fills it", () =>
      Effect.gen(function* () {
        const chain = yield* Chain
        const terms = yield* challenge
        // Short-lived (two minutes, as a client may choose), so it expires while the other stays valid.
        const shortLived = yield* Effect.promise(() => signPayment(chain.accounts.payers[0]!, terms, (r) => ({ ...r, maxTimeoutSeconds: 120 })))
        const queued = yield* signed(1)
        const [shortRequest, queuedRequest] = [newRequestId(), newRequestId()]
        yield* chainDo((c) => c.pauseMining())
        const lost = pendingTx(yield* Effect.flip(reserveAndCommit(shortLived, shortRequest)))
        pendingTx(yield* Effect.flip(reserveAndCommit(queued, queuedRequest)))
        yield* chainDo((c) => c.dropTransaction(lost))
        yield* chainDo((c) => c.advanceTime(300))
        yield* chainDo((c) => c.mine())
        yield* chainDo((c) => c.resumeMining())
        // The dropped one expired unspent: a 402, nothing charged.
        expect(yield* Effect.flip(retry(shortLived, shortRequest))).toMatchObject({ _tag: "PaymentRequired", error: { code: "invalid_payment" } })
        // The other waits behind the lost nonce until its retry fills it; the next block mines both.
        yield* Effect.either(retry(queued, queuedRequest))
        yield* chainDo((c) => c.mine())
        const settled = yield* retry(queued, queuedRequest)
        expect(yield* transfersFrom(yield* payerAddress(1))).toEqual([{ transactionHash: receiptOf(settled.paymentResponse).transaction, value: PRICE }])
        expect(yield* transfersFrom(yield* payerAddress(0))).toEqual([])
        expect(yield* settlerNonce(chain, "pending")).toBe(yield* settlerNonce(chain, "latest"))
      }))
  })

  const PER_INSTANCE = 6

  // Live clock: the authorizations are signed with the wall clock's time.
  it.scopedLive(
    `two instances settling with one key at once (${realPostgresUrl ? "real PostgreSQL, a pool each" : "PGlite, one backend"}): every payment settles, one transfer each, no nonce wasted`,
    () =>
      Effect.gen(function* () {
        const chain = yield* Effect.acquireRelease(
          Effect.promise(() => startChain({ payers: 4 })),
          (c) => Effect.promise(() => c.close())
        )
        const database = yield* sharedTestDatabase
        const config = AppConfigFromEnv(x402Env(chain)).pipe(Layer.orDie)
        const instance = Effect.map(
          Layer.build(X402Layer({ interval: "1 hour" }).pipe(Layer.orDie, Layer.provide(Layer.merge(config, database.instance())))),
          (context) => Context.get(context, X402Funding)
        )
        const instances = [yield* instance, yield* instance]
        const terms = (yield* Effect.flip(instances[0]!.challenge)).payment_required as X402PaymentRequired
        const payloads: ReadonlyArray<PaymentPayload> = yield* Effect.forEach(Array.from({ length: 2 * PER_INSTANCE }, (_, i) => i), (i) =>
          Effect.promise(() => signPayment(chain.accounts.payers[i % 4]!, terms))
        )
        const before = yield* settlerNonce(chain, "latest")
        const outcomes = yield* Effect.forEach(
          payloads,
          (payload, i) =>
            Effect.either(
              Effect.gen(function* () {
                const method = yield* instances[i % 2]!.identify(paymentCredential(header(payload)))
                const reservation = yield* method.reserve(newRequestId())
                return yield* reservation.settle(unsaved)
              })
            ),
          { concurrency: "unbounded" }
        )
        expect(outcomes.filter(Either.isLeft).map((o) => o.left)).toEqual([])
        for (const payer of chain.accounts.payers) {
          expect(yield* Effect.promise(() => chain.transfers(payer.address, chain.accounts.payTo.address))).toHaveLength((2 * PER_INSTANCE) / chain.accounts.payers.length)
        }
        // Every nonce carried a payment: none was signed twice, none left a gap to fill.
        expect((yield* settlerNonce(chain, "latest")) - before).toBe(2 * PER_INSTANCE)
      }),
    120_000
  )
})
