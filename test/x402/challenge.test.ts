import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { AppConfigFromEnv } from "../../src/config.ts"
import { X402Funding, X402Layer } from "../../src/x402/X402Funding.ts"
import { TestDatabase } from "../support/database.ts"
import { decodeChallengeHeader, refusal } from "./layer.ts"
import { paymentCredential } from "../support/funding.ts"

const PAY_TO = "0x1111111111111111111111111111111111111111"
const BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"

const x402With = (env: Record<string, string>) =>
  X402Layer().pipe(Layer.provideMerge(AppConfigFromEnv(env)), Layer.provideMerge(TestDatabase), Layer.orDie)

describe("x402 challenge", () => {
  layer(
    x402With({
      PUBLIC_BASE_URL: "https://api.morsel.example",
      X402_PAY_TO: PAY_TO,
      X402_SETTLER_PRIVATE_KEY: `0x${"ab".repeat(32)}`,
      // Never contacted: a challenge needs no chain.
      X402_RPC_URL: "http://127.0.0.1:9"
    })
  )("with X402_PAY_TO set", (it) => {
    it.effect("answers 402 with the x402 v2 PaymentRequired in the body and, base64-encoded, in PAYMENT-REQUIRED", () =>
      Effect.gen(function* () {
        const x402 = yield* X402Funding
        const { error, headers } = yield* refusal(x402.challenge)
        expect(error).toMatchObject({ _tag: "PaymentRequired", error: { code: "payment_required" } })
        const expected = {
          x402Version: 2,
          resource: { url: "https://api.morsel.example/v1/analyze" },
          accepts: [
            {
              scheme: "exact",
              network: "eip155:8453",
              amount: "10000",
              asset: BASE_USDC,
              payTo: PAY_TO,
              extra: { name: "USD Coin", version: "2" }
            }
          ]
        }
        const body = (error as { payment_required: unknown }).payment_required
        expect(body).toMatchObject(expected)
        const header = headers["payment-required"]!
        // Standard padded base64 of UTF-8 JSON.
        expect(header).toMatch(/^[A-Za-z0-9+/]+={0,2}$/)
        expect(JSON.parse(Buffer.from(header, "base64").toString("utf8"))).toEqual(body)
        const accepted = decodeChallengeHeader(headers)!.accepts[0]!
        expect(accepted.maxTimeoutSeconds).toBeGreaterThanOrEqual(300)
      }))

    it.effect("offers the challenge with another code too (a credit key without credits)", () =>
      Effect.gen(function* () {
        const x402 = yield* X402Funding
        const { error, headers } = yield* refusal(x402.challengeWith("insufficient_credits", "no credits left"))
        expect(error).toMatchObject({ error: { code: "insufficient_credits", message: "no credits left" } })
        expect(decodeChallengeHeader(headers)?.accepts).toHaveLength(1)
      }))

    it.effect("an undecodable PAYMENT-SIGNATURE is refused at once with a fresh challenge", () =>
      Effect.gen(function* () {
        const x402 = yield* X402Funding
        const { error, headers } = yield* refusal(x402.identify(paymentCredential("e30=")))
        expect(error).toMatchObject({ _tag: "PaymentRequired", error: { code: "invalid_payment" } })
        expect(decodeChallengeHeader(headers)?.accepts).toHaveLength(1)
      }))
  })

  layer(x402With({}))("without X402_PAY_TO", (it) => {
    it.effect("says x402 is unavailable and issues no challenge", () =>
      Effect.gen(function* () {
        const x402 = yield* X402Funding
        expect(x402.enabled).toBe(false)
        for (const refused of [x402.challenge, x402.identify(paymentCredential("e30="))]) {
          const { error, headers } = yield* refusal(refused)
          expect(error).toMatchObject({ _tag: "PaymentRequired", error: { code: "x402_unavailable" } })
          expect((error as { payment_required?: unknown }).payment_required).toBeUndefined()
          expect(headers["payment-required"]).toBeUndefined()
        }
      }))
  })

  it.effect("X402_PAY_TO without a settler key or facilitator stops the start with a clear message", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Layer.build(X402Layer().pipe(Layer.provide(AppConfigFromEnv({ X402_PAY_TO: PAY_TO })), Layer.provide(TestDatabase)))
      )
      expect(String(error)).toMatch(/X402_SETTLER_PRIVATE_KEY.*X402_FACILITATOR_URL/)
    }).pipe(Effect.scoped))
})
