// POST /v1/analyze paid per call with the official x402 client, unchanged: @x402/fetch + the exact EVM scheme + a viem account, on the memory chain.
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { Address } from "viem"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { memorySeam, type PaymentChain, TestChain } from "../support/memoryChain.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { errorCode, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"
import { x402Env } from "../support/x402.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"

const PRICE = 10_000n

const NoFoodDb = Layer.succeed(FoodDb, { matcherVersion: "none", match: () => Effect.succeedNone, ...noFoods })

const photo = await makeImage(640, 480, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }

const setup = Effect.gen(function* () {
  const chain = yield* TestChain
  const fake = yield* startFakeOpenAI()
  const { url } = yield* startServer({
    env: { ...x402Env(chain), OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url, VISION_MODEL: "fake-vision-1" },
    dependencies: Layer.mergeAll(VisionModelLive, NoFoodDb, FundingLive, LimitsUnlimited),
    chain: yield* memorySeam
  })
  return { chain, fake, url }
})

/** The official client for payer `i`, remembering the PAYMENT-SIGNATURE it sent (for an identical retry). */
const clientFor = (chain: PaymentChain, i: number) => {
  const sent: Array<string> = []
  const recording: typeof fetch = (input, init) => {
    const signature = new Headers(input instanceof Request ? input.headers : init?.headers).get("payment-signature")
    if (signature) sent.push(signature)
    return fetch(input, init)
  }
  // As an integrator sets it up: Base USDC is among the client's default tokens, so no allowance is needed.
  const paidFetch = wrapFetchWithPayment(recording, registerExactEvmScheme(new x402Client(), { signer: chain.accounts.payers[i]! }))
  const analyze = (url: string, idempotencyKey: string) =>
    Effect.promise(async () => {
      const response = await paidFetch(`${url}/v1/analyze`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": idempotencyKey },
        body: JSON.stringify(body)
      })
      return { status: response.status, headers: response.headers, body: (await response.json()) as unknown }
    })
  return { analyze, sent, address: chain.accounts.payers[i]!.address }
}

const transfers = (chain: PaymentChain, from: Address) => Effect.promise(() => chain.transfers(from, chain.accounts.payTo.address))

describe("x402 end to end over HTTP", () => {
  it.scopedLive("the official client pays one analysis: 200, balances move by exactly 10000, the receipt names the mined transfer; replay pays nothing", () =>
    Effect.gen(function* () {
      const { chain, fake, url } = yield* setup
      const client = clientFor(chain, 0)
      const before = yield* Effect.promise(() => chain.balanceOf(client.address))
      // Without payment: the challenge.
      const unpaid = yield* Effect.promise(() => send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": "x402-e2e-challenge-1" } }))
      expect(unpaid.status).toBe(402)
      expect(unpaid.headers.get("payment-required")).toBeTruthy()
      expect(fake.requests).toHaveLength(0)

      fake.enqueue(Reply.answer(chickenRice))
      const paid = yield* client.analyze(url, "x402-e2e-happy-000001")
      expect(paid.status).toBe(200)
      expect(paid.body).toMatchObject({ dish_name: "Grilled chicken with rice", estimate: true })
      const receipt = decodePaymentResponseHeader(paid.headers.get("payment-response")!)
      expect(receipt).toMatchObject({ success: true, network: "eip155:8453" })
      expect(yield* transfers(chain, client.address)).toEqual([{ transactionHash: receipt.transaction, value: PRICE }])
      expect(yield* Effect.promise(() => chain.balanceOf(client.address))).toBe(before - PRICE)

      // The same request again: the saved result and the same receipt, no second transfer, no second model call.
      const replay = yield* client.analyze(url, "x402-e2e-happy-000001")
      expect(replay.status).toBe(200)
      expect(replay.body).toEqual(paid.body)
      expect(replay.headers.get("payment-response")).toBe(paid.headers.get("payment-response"))
      expect(fake.requests).toHaveLength(1)
      expect(yield* transfers(chain, client.address)).toHaveLength(1)

      // The same authorization under a new Idempotency-Key: refused, nothing served.
      const reused = yield* Effect.promise(() =>
        send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": "x402-e2e-reused-00001", "payment-signature": client.sent[0]! } })
      )
      expect(reused.status).toBe(409)
      expect(errorCode(reused)).toBe("authorization_reused")
      expect(fake.requests).toHaveLength(1)
      expect(yield* transfers(chain, client.address)).toHaveLength(1)
    }).pipe(Effect.provide(TestChain.memory())))

  it.scopedLive("an analysis failure is a 502 and moves nothing", () =>
    Effect.gen(function* () {
      const { chain, fake, url } = yield* setup
      const client = clientFor(chain, 1)
      fake.enqueue(Reply.content("this is not JSON"))
      const failed = yield* client.analyze(url, "x402-e2e-failure-0001")
      expect(failed.status).toBe(502)
      expect(yield* transfers(chain, client.address)).toEqual([])
    }).pipe(Effect.provide(TestChain.memory())))

  it.scopedLive("mining paused → 503 payment_pending; mining resumed → the identical retry answers 200, one transfer", () =>
    Effect.gen(function* () {
      const { chain, fake, url } = yield* setup
      const client = clientFor(chain, 2)
      fake.enqueue(Reply.answer(chickenRice))
      yield* Effect.promise(() => chain.pauseMining())
      const pending = yield* client.analyze(url, "x402-e2e-pending-0001")
      expect(pending.status).toBe(503)
      expect(pending.headers.get("retry-after")).toBe("60")
      expect(pending.body).toMatchObject({ error: { code: "payment_pending" }, payment_response: { errorReason: "settlement_pending" } })
      expect(yield* transfers(chain, client.address)).toEqual([])
      yield* Effect.promise(() => chain.resumeMining())
      const retried = yield* Effect.promise(() =>
        send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": "x402-e2e-pending-0001", "payment-signature": client.sent[0]! } })
      )
      expect(retried.status).toBe(200)
      const receipt = decodePaymentResponseHeader(retried.headers.get("payment-response")!)
      expect(yield* transfers(chain, client.address)).toEqual([{ transactionHash: receipt.transaction, value: PRICE }])
      expect(fake.requests).toHaveLength(1)
    }).pipe(Effect.provide(TestChain.memory())))
})
