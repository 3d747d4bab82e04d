// The fast lane answers challenges and replays with the same bytes as the HttpApi stack, and leaves everything else to it.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Context, Effect, Layer, Option, TestClock } from "effect"
import sharp from "sharp"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { InputFingerprint } from "../../src/domain/ids.ts"
import { ReplayCache, ReplayCacheLive, replayKey } from "../../src/http/fastLane.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { startSandbox } from "../../src/testing.ts"
import { TestDatabase } from "../support/database.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { errorCode, send } from "../support/http.ts"
import { expectSameAnswer, laneAnswers } from "../support/lanes.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { memorySeam, TestChain } from "../support/memoryChain.ts"
import { startServer } from "../support/server.ts"
import { x402Env } from "../support/x402.ts"

const photo = await makeImage(320, 240, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }
/** A photo long enough to be lifted out of its body (over 64 KiB of base64): noise does not compress. */
const noisy = (
  await sharp(randomBytes(300 * 300 * 3), { raw: { width: 300, height: 300, channels: 3 } })
    .jpeg({ quality: 90 })
    .toBuffer()
).toString("base64")

/** Two instances on one database: one with the fast lane, one that sends everything through the HttpApi stack. */
const twoInstances = Effect.gen(function* () {
  const chain = yield* TestChain
  const fake = yield* startFakeOpenAI()
  fake.setFallback(Reply.answer(chickenRice))
  const database = yield* Layer.build(TestDatabase.pipe(Layer.orDie))
  const seam = yield* memorySeam
  const start = (withoutFastLane: boolean) =>
    startServer({
      env: { ...x402Env(chain), OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url },
      dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited),
      chain: seam,
      database: Layer.succeedContext(database),
      withoutFastLane
    })
  const lane = yield* start(false)
  const stack = yield* start(true)
  return { chain, fake, lane: lane.url, stack: stack.url }
})

describe("fast lane", () => {
  it.scopedLive("a 402 challenge: the same status, headers and body as the stack's, given by the lane", () =>
    Effect.gen(function* () {
      const { lane, stack } = yield* twoInstances
      const before = yield* laneAnswers("challenge")
      const ask = (url: string) => Effect.promise(() => send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": "fast-lane-challenge-1" } }))
      const fromLane = yield* ask(lane)
      expect(yield* laneAnswers("challenge")).toBe(before + 1)
      const fromStack = yield* ask(stack)
      expect(yield* laneAnswers("challenge")).toBe(before + 1)
      expect(fromLane.status).toBe(402)
      expect(fromLane.headers.get("payment-required")).toMatch(/^[A-Za-z0-9+/]+=*$/)
      expectSameAnswer(fromLane, fromStack)
    }).pipe(Effect.provide(TestChain.memory())))

  it.scopedLive("what the lane reads but does not answer reaches the stack whole: invalid input, both credentials, a foreign origin", () =>
    Effect.gen(function* () {
      const { lane, stack } = yield* twoInstances
      const before = yield* laneAnswers("challenge")
      const cases: ReadonlyArray<Parameters<typeof send>[1]> = [
        { body: { ...body, image_base64: "not base64!" }, headers: { "idempotency-key": "fast-lane-invalid-01" } },
        { body: { ...body, language: "de" }, headers: { "idempotency-key": "fast-lane-invalid-02" } },
        { body: { ...body, extra: 1 }, headers: { "idempotency-key": "fast-lane-invalid-03" } },
        { body, headers: { "idempotency-key": "short" } },
        { rawBody: "{\"image_base64\":", headers: { "content-type": "application/json", "idempotency-key": "fast-lane-invalid-04" } },
        { body, headers: { "idempotency-key": "fast-lane-invalid-05", authorization: "Bearer nope", "payment-signature": "e30=" } },
        { body, headers: { "idempotency-key": "fast-lane-invalid-06", origin: "https://elsewhere.example" } },
        // The first image valid, the last (JSON.parse's) not: a repeated key, refused by both.
        {
          rawBody: `{"image_base64":"${noisy}","mime_type":"image/jpeg","image_base64":"\\u0000"}`,
          headers: { "content-type": "application/json", "idempotency-key": "fast-lane-invalid-07" }
        }
      ]
      for (const request of cases) {
        const fromLane = yield* Effect.promise(() => send(`${lane}/v1/analyze`, request))
        const fromStack = yield* Effect.promise(() => send(`${stack}/v1/analyze`, request))
        expect([400, 403], fromLane.text.slice(0, 200)).toContain(fromLane.status)
        expectSameAnswer(fromLane, fromStack)
      }
      expect(yield* laneAnswers("challenge")).toBe(before)
    }).pipe(Effect.provide(TestChain.memory())))

  it.scopedLive("an x402 replay: the same request is answered by the lane with the stack's bytes and receipt; nothing moves twice", () =>
    Effect.gen(function* () {
      const { chain, fake, lane, stack } = yield* twoInstances
      const payer = chain.accounts.payers[0]!
      let signature = ""
      const recording: typeof fetch = (input, init) => {
        signature = new Headers(input instanceof Request ? input.headers : init?.headers).get("payment-signature") ?? signature
        return fetch(input, init)
      }
      const paid = wrapFetchWithPayment(recording, registerExactEvmScheme(new x402Client(), { signer: payer }))
      const key = "fast-lane-x402-replay-1"
      const first = yield* Effect.promise(() =>
        paid(`${lane}/v1/analyze`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify(body) })
      )
      expect(first.status).toBe(200)
      const firstText = yield* Effect.promise(() => first.text())
      const identical = { rawBody: JSON.stringify(body), headers: { "content-type": "application/json", "idempotency-key": key, "payment-signature": signature } }
      const before = yield* laneAnswers("replay")
      const fromLane = yield* Effect.promise(() => send(`${lane}/v1/analyze`, identical))
      expect(fromLane.status).toBe(200)
      expect(yield* laneAnswers("replay")).toBe(before + 1)
      const fromStack = yield* Effect.promise(() => send(`${stack}/v1/analyze`, identical))
      expect(fromLane.text).toBe(firstText)
      expect(fromLane.headers.get("payment-response")).toBe(first.headers.get("payment-response"))
      expectSameAnswer(fromLane, fromStack)
      // The same input written another way is the same request: replayed too, as the stack would.
      const rewritten = { ...identical, rawBody: JSON.stringify({ mime_type: body.mime_type, language: "en", image_base64: body.image_base64 }, null, 1) }
      const again = yield* Effect.promise(() => send(`${lane}/v1/analyze`, rewritten))
      expect(yield* laneAnswers("replay")).toBe(before + 2)
      expectSameAnswer(again, yield* Effect.promise(() => send(`${stack}/v1/analyze`, rewritten)))
      // Another input under the same key is the stack's to refuse.
      const changed = yield* Effect.promise(() => send(`${lane}/v1/analyze`, { ...identical, rawBody: JSON.stringify({ ...body, language: "lt" }) }))
      expect(changed.status).toBe(409)
      expect(errorCode(changed)).toBe("idempotency_conflict")
      expect(yield* laneAnswers("replay")).toBe(before + 2)
      expect(fake.requests).toHaveLength(1)
      expect(yield* Effect.promise(() => chain.transfers(payer.address, chain.accounts.payTo.address))).toHaveLength(1)
    }).pipe(Effect.provide(TestChain.memory())))

  it.scoped("a credit replay comes from the lane for 24 hours, then the stack answers 410", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.setFallback(Reply.answer(chickenRice))
      const funding = yield* Layer.build(FundingMemory({ alice: 10 }))
      const { url } = yield* startServer({
        env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url },
        dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, Layer.succeedContext(funding), LimitsUnlimited)
      })
      const analyze = Effect.promise(() =>
        send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": "fast-lane-credit-replay", authorization: "Bearer memory_alice" } })
      )
      const first = yield* analyze
      expect(first.status).toBe(200)
      const before = yield* laneAnswers("replay")
      yield* TestClock.adjust("23 hours")
      const replay = yield* analyze
      expect(replay.text).toBe(first.text)
      expect(yield* laneAnswers("replay")).toBe(before + 1)
      yield* TestClock.adjust("1 hour")
      const gone = yield* analyze
      expect(gone.status).toBe(410)
      expect(errorCode(gone)).toBe("result_expired")
      expect(yield* laneAnswers("replay")).toBe(before + 1)
      expect(yield* Context.get(funding, FundingMemoryLedger).balances).toEqual({ alice: 9 })
    }))

  it.effect("the replay memory keeps the last 2,048 results, forgets expired ones, and knows which credential and key it holds", () =>
    Effect.gen(function* () {
      const replays = yield* ReplayCache
      const keyOf = (i: number, input = "photo") => replayKey({ authorization: "Bearer k", "idempotency-key": `key-${i}` }, InputFingerprint.make(input))
      const kept = (untilMs: number) => ({ body: "{}", paymentResponse: Option.none(), untilMs })
      for (let i = 0; i < 2_049; i++) replays.record(keyOf(i), kept(1_000))
      expect(replays.holds(keyOf(0).head)).toBe(false)
      expect(replays.lookup(keyOf(0).full, 0)).toBeUndefined()
      expect(replays.holds(keyOf(1).head)).toBe(true)
      expect(replays.lookup(keyOf(1).full, 999)?.untilMs).toBe(1_000)
      // Another input under the same credential and key is another request.
      expect(replays.lookup(keyOf(1, "another photo").full, 0)).toBeUndefined()
      // Used a moment ago, key 1 outlives key 2 when the next result comes in.
      replays.record(keyOf(2_049), kept(1_000))
      expect(replays.holds(keyOf(1).head)).toBe(true)
      expect(replays.holds(keyOf(2).head)).toBe(false)
      expect(replays.lookup(keyOf(3).full, 1_000)).toBeUndefined()
      expect(replays.holds(keyOf(3).head)).toBe(false)
    }).pipe(Effect.provide(ReplayCacheLive)))

  it.live("in the sandbox the lane's challenge says it comes from the sandbox", () =>
    Effect.gen(function* () {
      const sandbox = yield* Effect.acquireRelease(Effect.promise(() => startSandbox()), (running) => Effect.promise(running.close))
      const before = yield* laneAnswers("challenge")
      const answer = yield* Effect.promise(() => send(`${sandbox.url}/v1/analyze`, { body, headers: { "idempotency-key": "fast-lane-sandbox-01" } }))
      expect(answer.status).toBe(402)
      expect(answer.headers.get("morsel-sandbox")).toBe("true")
      expect(yield* laneAnswers("challenge")).toBe(before + 1)
    }).pipe(Effect.scoped))
})
