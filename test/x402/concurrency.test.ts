import { decodePaymentResponseHeader } from "@x402/core/http"
import type { PaymentPayload } from "@x402/core/types"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import type { RequestId } from "../../src/domain/ids.ts"
import { X402Funding } from "../../src/x402/X402Funding.ts"
import { Chain } from "../support/chain.ts"
import { realPostgresUrl } from "../support/database.ts"
import { challenge, X402Test } from "./layer.ts"
import { header, signPayment } from "../support/x402.ts"
import { newRequestId, paymentCredential, unsaved } from "../support/funding.ts"

const CONCURRENT = 20

/** One whole request's worth of payment handling: decode, verify and claim, then settle. */
const payOnce = (payload: PaymentPayload, requestId: RequestId) =>
  Effect.gen(function* () {
    const x402 = yield* X402Funding
    const method = yield* x402.identify(paymentCredential(header(payload)))
    const reservation = yield* method.reserve(requestId)
    return yield* reservation.settle(unsaved)
  })


describe.skipIf(!realPostgresUrl)("x402 on real PostgreSQL (concurrency)", () => {
  layer(X402Test(), { excludeTestServices: true })("one authorization, many requests", (it) => {
    const sign = (i: number) =>
      Effect.gen(function* () {
        const chain = yield* Chain
        const terms = yield* challenge
        return { payload: yield* Effect.promise(() => signPayment(chain.accounts.payers[i]!, terms)), chain, payer: chain.accounts.payers[i]!.address }
      })

    it.effect(`${CONCURRENT} concurrent requests with one authorization under different Idempotency-Keys: one paid, the rest refused, one transfer`, () =>
      Effect.gen(function* () {
        const { payload, chain, payer } = yield* sign(0)
        const outcomes = yield* Effect.all(
          Array.from({ length: CONCURRENT }, () => Effect.either(payOnce(payload, newRequestId()))),
          { concurrency: "unbounded" }
        )
        const paid = outcomes.filter(Either.isRight)
        const refused = outcomes.filter(Either.isLeft).map((o) => o.left)
        expect(paid).toHaveLength(1)
        expect(refused).toHaveLength(CONCURRENT - 1)
        for (const error of refused) expect(error).toMatchObject({ _tag: "Conflict", error: { code: "authorization_reused" } })
        const transfers = yield* Effect.promise(() => chain.transfers(payer, chain.accounts.payTo.address))
        expect(transfers).toHaveLength(1)
        expect(decodePaymentResponseHeader(Option.getOrThrow(paid[0]!.right.paymentResponse)).transaction).toBe(transfers[0]!.transactionHash)
      }))

    it.effect(`${CONCURRENT} concurrent attempts of the same request: every one answers the same receipt, one transfer`, () =>
      Effect.gen(function* () {
        const { payload, chain, payer } = yield* sign(1)
        const requestId = newRequestId()
        const outcomes = yield* Effect.all(
          Array.from({ length: CONCURRENT }, () => payOnce(payload, requestId)),
          { concurrency: "unbounded" }
        )
        const receipts = new Set(outcomes.map((o) => Option.getOrThrow(o.paymentResponse)))
        expect(receipts.size).toBe(1)
        const transfers = yield* Effect.promise(() => chain.transfers(payer, chain.accounts.payTo.address))
        expect(transfers).toHaveLength(1)
      }))
  })
})

describe.skipIf(realPostgresUrl)("x402 on real PostgreSQL (concurrency)", () => {
  it.skip("skipped: set TEST_DATABASE_URL=postgres://… to run the x402 concurrency tests on a real server", () => {})
})
