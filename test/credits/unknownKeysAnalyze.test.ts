// Made-up keys are fenced on every door that takes a key: POST /v1/analyze and MCP's analyze_food count unknown keys
// against their client address's allowance (the one the credit endpoints use, 30 a minute), then answer 429
// rate_limited with a minute's wait; a paying key, even from the same address, is never slowed by it.
import { request } from "node:http"
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { analyzeFood, connect, fakeStripe, keyWith, toolErrorCode } from "../support/clients.ts"
import { type FakeOpenAI, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { isRecord } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

class Service extends Context.Tag("test/FencedService")<Service, { readonly url: string; readonly model: FakeOpenAI; readonly paid: string }>() {}

const ServiceLive = Layer.scoped(
  Service,
  Effect.gen(function* () {
    const stripe = yield* fakeStripe
    const model = yield* startFakeOpenAI()
    const { url } = yield* startServer({
      env: { ...stripe.env, OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: model.url, VISION_MODEL: "fake-vision-1" },
      dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited)
    })
    const paid = yield* keyWith(url, stripe, 500)
    return { url, model, paid }
  })
)

const photo = await makeImage(640, 480, "jpeg")
const image = { image_base64: photo.base64, mime_type: photo.mime }
let calls = 0
const idem = () => `fence-test-key-${String(++calls).padStart(6, "0")}`

interface Answer {
  readonly status: number
  readonly code: unknown
  readonly retryAfter: string | undefined
}

/** POST /v1/analyze with a Bearer key from a chosen local address (any 127.x address reaches a server on 127.0.0.1). */
const analyzeFrom = (url: string, from: string, key: string): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const text = JSON.stringify(image)
    const req = request(
      `${url}/v1/analyze`,
      {
        method: "POST",
        localAddress: from,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": idem() }
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          let body: unknown
          try {
            body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
          } catch {
            body = undefined
          }
          const code = isRecord(body) && isRecord(body["error"]) ? body["error"]["code"] : undefined
          const retry = res.headers["retry-after"]
          resolve({ status: res.statusCode ?? 0, code, retryAfter: typeof retry === "string" ? retry : undefined })
        })
      }
    )
    req.on("error", reject)
    req.end(text)
  })

const LIMIT = 30
const STORM = 65

describe("unknown keys on the analysis doors", () => {
  // The server runs on the real clock: the allowance is counted per clock minute.
  layer(ServiceLive, { excludeTestServices: true })("on the running server", (it) => {
    it.effect(`${STORM} made-up keys from one address on POST /v1/analyze: the address's allowance answers 401, the rest 429 rate_limited; a paying key is served`, () =>
      Effect.gen(function* () {
        const { url, model, paid } = yield* Service
        const before = model.requests.length
        const answers = yield* Effect.forEach(
          Array.from({ length: STORM }),
          () => Effect.promise(() => analyzeFrom(url, "127.0.0.2", newCreditKey(true))),
          { concurrency: 8 }
        )
        expect(answers.filter((a) => a.status !== 401 && a.status !== 429)).toEqual([])
        const unauthorized = answers.filter((a) => a.status === 401)
        // One minute's allowance, or two if the storm straddles a minute's end.
        expect(unauthorized.length).toBeGreaterThanOrEqual(LIMIT)
        expect(unauthorized.length).toBeLessThanOrEqual(2 * LIMIT)
        expect(unauthorized.every((a) => a.code === "invalid_key")).toBe(true)
        const limited = answers.filter((a) => a.status === 429)
        expect(limited.length).toBeGreaterThanOrEqual(STORM - 2 * LIMIT)
        expect(limited.every((a) => a.code === "rate_limited" && a.retryAfter === "60")).toBe(true)
        expect(model.requests.length).toBe(before)

        // A paying key from the storm's own address is served.
        model.enqueue(Reply.answer(chickenRice))
        const served = yield* Effect.promise(() => analyzeFrom(url, "127.0.0.2", paid))
        expect(served.status).toBe(200)
      }),
      60_000
    )

    it.scoped(`${STORM} made-up keys from one address on MCP analyze_food: tool errors invalid_key, then rate_limited with retry_after_seconds 60; a paying key is served`, () =>
      Effect.gen(function* () {
        const { url, model, paid } = yield* Service
        const before = model.requests.length
        // Buying the paid key spent 2 of this address's allowance (the first checkout, the confirm of an unpaid key).
        const results = yield* Effect.forEach(
          Array.from({ length: STORM }),
          () => Effect.flatMap(connect(url, { authorization: `Bearer ${newCreditKey(true)}` }), (mcp) => analyzeFood(mcp, { ...image, idempotency_key: idem() })),
          { concurrency: 8 }
        )
        expect(results.every((r) => r.isError === true)).toBe(true)
        const codes = results.map(toolErrorCode)
        expect(codes.filter((c) => c !== "invalid_key" && c !== "rate_limited")).toEqual([])
        const unauthorized = codes.filter((c) => c === "invalid_key").length
        expect(unauthorized).toBeGreaterThanOrEqual(LIMIT - 2)
        expect(unauthorized).toBeLessThanOrEqual(2 * LIMIT)
        const limited = results.filter((r) => toolErrorCode(r) === "rate_limited")
        expect(limited.length).toBeGreaterThanOrEqual(STORM - 2 * LIMIT)
        expect(limited.every((r) => isRecord(r.structuredContent) && r.structuredContent["retry_after_seconds"] === 60)).toBe(true)
        expect(model.requests.length).toBe(before)

        // A paying key from the same address is served over MCP.
        model.enqueue(Reply.answer(chickenRice))
        const served = yield* analyzeFood(yield* connect(url, { authorization: `Bearer ${paid}` }), { ...image, idempotency_key: idem() })
        expect(served.isError).not.toBe(true)
      }),
      // 66 MCP connections, each discovering the server before its call: slow on a loaded machine.
      120_000
    )
  })
})
