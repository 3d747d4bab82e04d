// Hostile request bodies: deep nesting and huge field values get a short 400 with a code, never an empty 500.
import { describe, expect, it } from "@effect/vitest"
import { request } from "node:http"
import { Context, Effect, Layer } from "effect"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { MAX_BODY_BYTES, MAX_JSON_CONTAINERS, MAX_JSON_DEPTH } from "../../src/domain/bodies.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { type Answer, errorCode, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { chickenRice } from "../support/meals.ts"
import { Server, serverLayer, startServer } from "../support/server.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"

const ServerUnderTest = serverLayer({
  dependencies: Layer.mergeAll(
    VisionModelLive,
    Layer.succeed(FoodDb, { matcherVersion: "test", match: () => Effect.succeedNone, ...noFoods }),
    FundingMemory({ alice: 1 }),
    LimitsUnlimited
  )
})

const post = (path: string, rawBody: string, headers: Record<string, string> = {}) =>
  Effect.flatMap(Server, ({ url }) =>
    Effect.promise(() =>
      send(`${url}${path}`, {
        rawBody,
        headers: { "content-type": "application/json", "idempotency-key": "hostile-body-key-0001", authorization: "Bearer memory_alice", ...headers }
      })
    )
  )

const png = await makeImage(64, 48, "png")

/**
 * Posts `body` with Transfer-Encoding: chunked (no Content-Length, as a streaming client sends it), 64 KiB at a
 * time, and resolves with the answer as soon as it arrives, even while the body is still being sent.
 */
const postChunked = (url: string, body: string) =>
  new Promise<{ status: number; text: string; connection: string | undefined }>((resolve, reject) => {
    const outgoing = request(`${url}/v1/analyze`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": "hostile-chunked-key-01", authorization: "Bearer memory_alice" }
    })
    outgoing.on("response", (incoming) => {
      let text = ""
      incoming.setEncoding("utf8").on("data", (chunk) => (text += chunk))
      incoming.on("end", () => resolve({ status: incoming.statusCode ?? 0, text, connection: incoming.headers.connection }))
    })
    // The server may close the connection before the whole body is sent: that is its answer to a body too large.
    outgoing.on("error", (error) => (outgoing.writableEnded ? undefined : reject(error)))
    const send = (at: number): void => {
      if (outgoing.destroyed) return
      if (at >= body.length) return void outgoing.end()
      if (outgoing.write(body.slice(at, at + 65_536))) send(at + 65_536)
      else outgoing.once("drain", () => send(at + 65_536))
    }
    send(0)
  })

/** `levels` arrays inside each other around `inner`, e.g. 2 → `[[inner]]`. */
const nestedArrays = (levels: number, inner = "1") => `${"[".repeat(levels)}${inner}${"]".repeat(levels)}`
/** `levels` objects inside each other, e.g. 2 → `{"a":{"a":1}}`. */
const nestedObjects = (levels: number) => `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`

const expectInvalidRequest = (answer: Answer) => {
  expect(answer.status, answer.text.slice(0, 300)).toBe(400)
  expect(errorCode(answer)).toBe("invalid_request")
}

const ORDER = "5b0c7b8e-3f7a-4d8e-9a61-1f0b2c3d4e5f"

/** Each documented JSON endpoint with a body whose field `field` holds `value` (raw JSON text). */
const bodies = (value: string): ReadonlyArray<readonly [string, string]> => [
  ["/v1/analyze", `{"image_base64":"${png.base64}","mime_type":"image/png","language":${value}}`],
  ["/v1/analyze", `{"image_base64":${value},"mime_type":"image/png"}`],
  ["/v1/credits/checkout", `{"order_id":"${ORDER}","context":${value}}`],
  ["/v1/credits/checkout-status", `{"order_id":${value}}`],
  ["/v1/credits/feedback", `{"request_id":"${ORDER}","category":"other","note":${value}}`]
]

describe("hostile bodies", () => {
  it.layer(ServerUnderTest, { timeout: 60_000 })((it) => {
    it.effect("5,000 levels of arrays or objects in any field: 400 invalid_request on every endpoint", () =>
      Effect.gen(function* () {
        for (const deep of [nestedArrays(5_000), nestedObjects(5_000)]) {
          for (const [path, body] of bodies(deep)) {
            const answer = yield* post(path, body)
            expectInvalidRequest(answer)
            expect(answer.text.length).toBeLessThan(2_000)
          }
        }
        // The whole body nested, too.
        expectInvalidRequest(yield* post("/v1/analyze", nestedArrays(100_000)))
      }))

    it.effect(`nesting up to ${MAX_JSON_DEPTH} levels is read as usual; one level more is refused before decoding`, () =>
      Effect.gen(function* () {
        // The body object is one level, so `language` may hold MAX_JSON_DEPTH - 1 levels.
        const within = yield* post("/v1/analyze", bodies(nestedArrays(MAX_JSON_DEPTH - 1))[0]![1])
        expectInvalidRequest(within)
        expect((within.body as { error: { message: string } }).error.message).toMatch(/^language/)
        const beyond = yield* post("/v1/analyze", bodies(nestedArrays(MAX_JSON_DEPTH))[0]![1])
        expectInvalidRequest(beyond)
        expect((beyond.body as { error: { message: string } }).error.message).toMatch(/nested/)
        // Brackets inside strings are text, not nesting.
        const text = yield* post("/v1/analyze", bodies(JSON.stringify("[".repeat(10_000)))[0]![1])
        expectInvalidRequest(text)
        expect((text.body as { error: { message: string } }).error.message).toMatch(/^language/)
      }))

    it.effect(`a body of more than ${MAX_JSON_CONTAINERS} objects and arrays is refused before it is parsed; as many as that (the body and its list included) are read as usual`, () =>
      Effect.gen(function* () {
        // 890,000 empty objects fit the 2.7 MB limit; their parse alone held the server for a quarter of a second.
        const many = `{"items":[${Array.from({ length: 890_000 }, () => "{}").join(",")}]}`
        const started = performance.now()
        const refused = yield* post("/v1/nutrition", many)
        expectInvalidRequest(refused)
        expect((refused.body as { error: { message: string } }).error.message).toBe(`request body holds more than ${MAX_JSON_CONTAINERS} objects and arrays`)
        expect(performance.now() - started).toBeLessThan(5_000)
        const within = yield* post("/v1/nutrition", `{"items":[${Array.from({ length: MAX_JSON_CONTAINERS - 2 }, () => "{}").join(",")}]}`)
        expectInvalidRequest(within)
        expect((within.body as { error: { message: string } }).error.message).toMatch(/^items/)
      }))

    it.effect("a body of unknown length: read when it is within the limit, 413 once it passes it", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const within = yield* Effect.promise(() => postChunked(url, `{"image_base64":"${png.base64}","mime_type":"image/png","language":"xx"}`))
        expect(within.status, within.text).toBe(400)
        expect(within.text).toContain("language")
        const huge = yield* Effect.promise(() => postChunked(url, `{"image_base64":"${"A".repeat(MAX_BODY_BYTES + 100_000)}","mime_type":"image/png"}`))
        expect(huge.status, huge.text).toBe(413)
        expect(JSON.parse(huge.text).error.code).toBe("request_too_large")
        expect(huge.connection).toBe("close")
      }))

    it.effect("the tool interface: deep or huge arguments are a short tool error, not a 500", () =>
      Effect.gen(function* () {
        for (const value of [nestedArrays(5_000), JSON.stringify("x".repeat(1_000_000))]) {
          const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"analyze_food","arguments":{"idempotency_key":"hostile-body-key-0001","image_base64":"${png.base64}","mime_type":"image/png","language":${value}}}}`
          const answer = yield* post("/mcp", call, { accept: "application/json, text/event-stream" })
          expect(answer.status, answer.text.slice(0, 300)).toBe(200)
          expect(answer.text).toContain("invalid_request")
          expect(answer.text.length).toBeLessThan(4_000)
        }
      }))

    it.effect("a 1 MB field value or key is not echoed back: the answer stays small", () =>
      Effect.gen(function* () {
        const key = yield* post("/v1/analyze", `{"image_base64":"${png.base64}","mime_type":"image/png",${JSON.stringify("k".repeat(1_000_000))}:1}`)
        expectInvalidRequest(key)
        expect(key.text.length).toBeLessThan(2_000)
        const huge = JSON.stringify("x".repeat(1_000_000))
        for (const [path, body] of bodies(huge)) {
          const answer = yield* post(path, body)
          // Refused (400, or 401 for a field the key check reaches first) with a short body.
          expect([400, 401], answer.text.slice(0, 300)).toContain(answer.status)
          expect(errorCode(answer)).toEqual(expect.any(String))
          expect(answer.text.length, path).toBeLessThan(2_000)
        }
      }))
  })

  it.scoped("a defect inside the service is a JSON 500 with a code, and nothing is charged", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.setFallback(Reply.answer(chickenRice))
      const funding = yield* Layer.build(FundingMemory({ alice: 2 }))
      // A food database that breaks in a way nobody planned for.
      const broken = Layer.succeed(FoodDb, { matcherVersion: "test", match: () => Effect.dieMessage("index corrupted"), ...noFoods })
      const { url } = yield* startServer({
        env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url },
        dependencies: Layer.mergeAll(VisionModelLive, broken, Layer.succeedContext(funding), LimitsUnlimited)
      })
      const answer = yield* Effect.promise(() =>
        send(`${url}/v1/analyze`, {
          body: { image_base64: png.base64, mime_type: png.mime },
          headers: { "idempotency-key": "hostile-defect-key-0001", authorization: "Bearer memory_alice" }
        })
      )
      expect(answer.status, answer.text).toBe(500)
      expect(errorCode(answer)).toBe("internal_error")
      expect(answer.text).not.toContain("index corrupted")
      const ledger = Context.get(funding, FundingMemoryLedger)
      expect(yield* ledger.balances).toEqual({ alice: 2 })
      expect(yield* ledger.reserved).toBe(0)
    }))
})
