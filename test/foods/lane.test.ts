// POST /v1/nutrition's lane answers a priced call with the HttpApi stack's bytes, counted once against the food
// limits before any pricing, against the address the call came from, and leaves every other call (refusals, unknown
// foods, browsers, bad bodies) to the stack.
import { request } from "node:http"
import { connect as connectTcp } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { TestDatabase } from "../support/database.ts"
import { errorCode, send } from "../support/http.ts"
import { expectSameAnswer, laneAnswers } from "../support/lanes.ts"
import { withinOneMinute } from "../support/minute.ts"
import { startServer } from "../support/server.ts"

const dependencies = Layer.mergeAll(VisionModelLive, FoodDbMemory(shippedFoods()), FundingMemory({ alice: 1 }), LimitsUnlimited)

/** Two instances on one database: one with its lanes, one that sends everything through the HttpApi stack. */
const twoInstances = (env: Record<string, string> = {}, foods: typeof dependencies = dependencies) =>
  Effect.gen(function* () {
    const database = yield* Layer.build(TestDatabase.pipe(Layer.orDie))
    const start = (withoutFastLane: boolean) => startServer({ env, dependencies: foods, database: Layer.succeedContext(database), withoutFastLane })
    return { lane: (yield* start(false)).url, stack: (yield* start(true)).url }
  })

type Request = Parameters<typeof send>[1] & { readonly path?: string }

const both = (servers: { lane: string; stack: string }, request: Request) =>
  Effect.promise(async () => {
    const path = request.path ?? "/v1/nutrition"
    const init = { method: "POST", ...request }
    return { fromLane: await send(`${servers.lane}${path}`, init), fromStack: await send(`${servers.stack}${path}`, init) }
  })

const nutritionAnswers = laneAnswers("nutrition")

const texts = ["rice, white, cooked", "chicken breast", "broccoli", "olive oil", "tofu"]
const ids = ["20045", "05064", "11090", "04053", "16427"]

describe("the nutrition lane", () => {
  it.scopedLive("a priced call: the lane's status, headers and body are the stack's, byte for byte", () =>
    Effect.gen(function* () {
      const servers = yield* twoInstances()
      const priced: Array<Request> = [
        { body: { items: [{ query: "broccoli", grams: 100 }] } },
        { body: { items: Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? { query: texts[i % 5], grams: 10 + i * 7.5 } : { fdc_id: ids[i % 5], grams: 50 })) } },
        { body: { items: [{ fdc_id: "01123", portion: { amount: 2, unit: "large" } }, { query: "milk", grams: 0.01 }], language: "lt" } },
        // Nothing matches a word: still a 200, with the suggestions and `complete: false`.
        { body: { items: [{ query: "zzqxv", grams: 10 }, { query: "apple", grams: 120 }] } },
        // Written another way (spaces, key order, a charset): the same call.
        { rawBody: '{ "items" : [ { "grams" : 100, "query" : "tofu" } ] }', headers: { "content-type": "application/json; charset=utf-8" } }
      ]
      const before = yield* nutritionAnswers
      for (const request of priced) {
        const answers = yield* both(servers, request)
        expect(answers.fromLane.status, answers.fromLane.text.slice(0, 200)).toBe(200)
        expectSameAnswer(answers.fromLane, answers.fromStack)
      }
      expect(yield* nutritionAnswers).toBe(before + priced.length)
    }), 120_000)

  it.scopedLive("every other call is the stack's: the same refusals, and the lane answers none of them", () =>
    Effect.gen(function* () {
      const servers = yield* twoInstances()
      const key = `morsel_test_${"0".repeat(64)}`
      const passed: Array<Request> = [
        { body: { items: [{ fdc_id: "99999999", grams: 10 }] } },
        { body: { items: [{ fdc_id: "01123", portion: { amount: 1, unit: "bucket" } }] } },
        { body: { items: [] } },
        { body: { items: Array.from({ length: 21 }, () => ({ query: "rice", grams: 1 })) } },
        { body: { items: [{ query: "rice", grams: 5001 }] } },
        { body: { items: [{ query: "rice", grams: 100 }], extra: true } },
        { rawBody: '{"items":[{"query":"rice","grams":100}],"items":[]}', headers: { "content-type": "application/json" } },
        { rawBody: '{"items":[', headers: { "content-type": "application/json" } },
        { rawBody: "{}", headers: { "content-type": "text/plain" } },
        { body: { items: [{ query: "rice", grams: 100 }] }, headers: { authorization: "Bearer nope" } },
        { body: { items: [{ query: "rice", grams: 100 }] }, headers: { authorization: `Bearer ${key}` } },
        { body: { items: [{ query: "rice", grams: 100 }] }, headers: { origin: "https://elsewhere.example" } },
        { body: { items: [{ query: "rice", grams: 100 }] }, path: "/v1/nutrition?debug=1" }
      ]
      const before = yield* nutritionAnswers
      for (const request of passed) {
        const { fromLane, fromStack } = yield* both(servers, request)
        expectSameAnswer(fromLane, fromStack)
      }
      const statuses = []
      for (const request of passed) statuses.push((yield* both(servers, request)).fromLane.status)
      expect(statuses).toEqual([404, 400, 400, 400, 400, 400, 400, 400, 415, 401, 401, 403, 200])
      expect(yield* nutritionAnswers).toBe(before)
    }))

  it.scopedLive("with LIMIT_FOODS_PER_MINUTE=3, three priced calls from the lane, then the stack's 429: each call counted once", () =>
    Effect.gen(function* () {
      const { lane } = yield* twoInstances({ LIMIT_FOODS_PER_MINUTE: "3" })
      const call = (body: unknown) => Effect.promise(() => send(`${lane}/v1/nutrition`, { method: "POST", body }))
      const before = yield* nutritionAnswers
      yield* withinOneMinute()
      // A refused body before them counts nothing, on either face.
      expect((yield* call({ items: [] })).status).toBe(400)
      for (let i = 0; i < 3; i++) expect((yield* call({ items: [{ query: texts[i], grams: 100 }] })).status).toBe(200)
      expect(yield* nutritionAnswers).toBe(before + 3)
      const refused = yield* call({ items: [{ query: "rice", grams: 100 }] })
      expect([refused.status, errorCode(refused)]).toEqual([429, "rate_limited"])
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      expect(yield* nutritionAnswers).toBe(before + 3)
    }))

  it.scopedLive("past the limit a call is refused before it is priced: the food index is not read for it", () =>
    Effect.gen(function* () {
      let reads = 0
      // The shipped foods, with every read of the index counted (one per priced call).
      const counted = Layer.effect(
        FoodDb,
        Effect.map(FoodDb, (foods) => FoodDb.of({ ...foods, reader: Effect.tap(foods.reader, () => Effect.sync(() => reads++)) }))
      ).pipe(Layer.provide(FoodDbMemory(shippedFoods())))
      const { lane } = yield* twoInstances({ LIMIT_FOODS_PER_MINUTE: "3" }, Layer.mergeAll(VisionModelLive, counted, FundingMemory({ alice: 1 }), LimitsUnlimited))
      const call = () => Effect.promise(() => send(`${lane}/v1/nutrition`, { method: "POST", body: { items: texts.map((query) => ({ query, grams: 100 })) } }))
      yield* withinOneMinute()
      const before = reads
      for (let i = 0; i < 3; i++) expect((yield* call()).status).toBe(200)
      expect(reads - before).toBe(3)
      for (let i = 0; i < 10; i++) {
        const refused = yield* call()
        expect([refused.status, errorCode(refused)]).toEqual([429, "rate_limited"])
      }
      expect(reads - before).toBe(3)
    }), 120_000)

  it.scopedLive("a client that hangs up right after its request is counted against its own address", () =>
    Effect.gen(function* () {
      const { lane } = yield* twoInstances({ LIMIT_FOODS_PER_MINUTE: "3" })
      const { port } = new URL(lane)
      const body = JSON.stringify({ items: [{ query: "rice", grams: 100 }] })
      const raw = `POST /v1/nutrition HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
      /** The whole request from 127.0.0.9, then the connection reset before any answer. */
      const hangUp = () =>
        new Promise<void>((resolve, reject) => {
          const socket = connectTcp({ host: "127.0.0.1", port: Number(port), localAddress: "127.0.0.9" }, () => {
            socket.write(raw, () => {
              socket.resetAndDestroy()
              resolve()
            })
          })
          socket.on("error", reject)
        })
      yield* withinOneMinute(20_000)
      const before = yield* nutritionAnswers
      for (let i = 0; i < 3; i++) yield* Effect.promise(hangUp)
      // The server priced and answered them to closed sockets; it has, once the lane counted three answers.
      for (let waited = 0; (yield* nutritionAnswers) < before + 3 && waited < 100; waited++) yield* Effect.sleep("50 millis")
      expect(yield* nutritionAnswers).toBe(before + 3)
      const fromAddress = yield* Effect.promise(() => sendFrom("127.0.0.9", `${lane}/v1/nutrition`, body))
      expect(fromAddress).toBe(429)
      // Another address has its own minute.
      expect(yield* Effect.promise(() => sendFrom("127.0.0.10", `${lane}/v1/nutrition`, body))).toBe(200)
    }), 120_000)
})

/** The status of one POST of `body` sent from a chosen local address. */
const sendFrom = (localAddress: string, url: string, body: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", localAddress, headers: { "content-type": "application/json" } }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode ?? 0))
    })
    req.on("error", reject)
    req.end(body)
  })
