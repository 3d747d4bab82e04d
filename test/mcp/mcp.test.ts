// The tool interface at /mcp with card credits: the official MCP SDK client against the running server, a fake model, the fake Stripe.
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Fiber, Layer } from "effect"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { type FakeOpenAI, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { FundingLive } from "../../src/server.ts"
import type { FakeStripe } from "../support/fakeStripe.ts"
import { errorCode, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice, noFood } from "../support/meals.ts"
import { startServer } from "../support/server.ts"
import { analyzeFood, balanceOf, connect, fakeStripe, firstText, keyWith, rest, toolErrorCode } from "../support/clients.ts"

class Service extends Context.Tag("test/McpService")<
  Service,
  { readonly url: string; readonly model: FakeOpenAI; readonly stripe: FakeStripe }
>() {}

const ServiceLive = Layer.scoped(
  Service,
  Effect.gen(function* () {
    const stripe = yield* fakeStripe
    const model = yield* startFakeOpenAI()
    const { url } = yield* startServer({
      env: { ...stripe.env, OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: model.url, VISION_MODEL: "fake-vision-1" },
      dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited)
    })
    return { url, model, stripe }
  })
)

const restCall = (path: string, key: string | undefined, body?: unknown, headers: Record<string, string> = {}) =>
  Effect.flatMap(Service, ({ url }) => rest(url, path, key, body, headers))

const buyKey = (credits: 0 | 500) => Effect.flatMap(Service, ({ stripe, url }) => keyWith(url, stripe, credits))

const balance = (key: string) => Effect.flatMap(Service, ({ url }) => balanceOf(url, key))

const client = (key?: string) =>
  Effect.flatMap(Service, ({ url }) => connect(url, key === undefined ? {} : { authorization: `Bearer ${key}` }))

const photo = await makeImage(640, 480, "jpeg")
const image = { image_base64: photo.base64, mime_type: photo.mime }
let keys = 0
/** A fresh idempotency key for each call that must not replay an earlier one. */
const idem = () => `mcp-test-key-${String(++keys).padStart(6, "0")}`

describe("MCP tool interface with card credits", () => {
  // The server runs on the real clock: its request fibers must not see a test clock stopped at 1970.
  layer(ServiceLive, { excludeTestServices: true })("on the running server", (it) => {
    it.scoped("tool discovery needs no key: one tool, schemas derived from the REST schemas, feedback pointed to REST", () =>
      Effect.gen(function* () {
        const mcp = yield* client()
        expect(mcp.getServerVersion()).toMatchObject({ name: "morsel" })
        const { tools } = yield* Effect.promise(() => mcp.listTools())
        expect(tools.map((t) => t.name)).toEqual(["analyze_food", "search_foods", "food_nutrition"])
        const tool = tools[0]!
        expect(tool.inputSchema).toMatchObject({
          type: "object",
          // The photo comes as image_base64 with mime_type or as image_file (a file reference), exactly one.
          required: ["idempotency_key"],
          additionalProperties: false,
          properties: {
            mime_type: { enum: ["image/jpeg", "image/png"] },
            language: { enum: ["en", "lt"] },
            image_base64: { maxLength: 2666668 }
          }
        })
        expect(Object.keys(tool.inputSchema.properties ?? {}).sort()).toEqual(
          ["idempotency_key", "image_base64", "image_file", "known_total_grams", "language", "mime_type"].sort()
        )
        expect(tool.outputSchema).toMatchObject({ type: "object", anyOf: expect.any(Array) })
        expect(tool.description).toContain("/v1/credits/feedback")
        expect(tool.description).toContain("not a tool")
      }))

    it.scoped("a Bearer key on the connection pays one credit; the same idempotency_key replays over MCP and REST without a charge", () =>
      Effect.gen(function* () {
        const { model } = yield* Service
        const key = yield* buyKey(500)
        const mcp = yield* client(key)
        const before = model.requests.length
        model.enqueue(Reply.answer(chickenRice))
        const idempotencyKey = idem()
        const first = yield* analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey })
        expect(first.isError ?? false).toBe(false)
        expect(first.structuredContent).toMatchObject({
          dish_name: "Grilled chicken with rice",
          estimate: true,
          model: "fake-vision-1",
          estimated_total_grams: 340,
          items: [{ name: "Grilled chicken breast" }, { name: "White rice" }, { name: "Olive oil" }]
        })
        expect(firstText(first)).toEqual(first.structuredContent)
        expect(first._meta?.["x402/payment-response"]).toBeUndefined()
        expect(yield* balance(key)).toBe(499)

        const replay = yield* analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey })
        expect(replay.structuredContent).toEqual(first.structuredContent)
        const overRest = yield* restCall("/v1/analyze", key, image, { "idempotency-key": idempotencyKey })
        expect(overRest.status).toBe(200)
        expect(overRest.body).toEqual(first.structuredContent)
        expect(model.requests.length - before).toBe(1)
        expect(yield* balance(key)).toBe(499)

        // The same key with another input is the REST idempotency conflict.
        const other = yield* analyzeFood(mcp, { ...image, known_total_grams: 300, idempotency_key: idempotencyKey })
        expect([other.isError, toolErrorCode(other)]).toEqual([true, "idempotency_conflict"])
      }))

    it.scoped("the same call while it runs: in_progress for the others, one model call, one credit", () =>
      Effect.gen(function* () {
        const { model } = yield* Service
        const key = yield* buyKey(500)
        const mcp = yield* client(key)
        const idempotencyKey = idem()
        const before = model.requests.length
        model.pause()
        model.enqueue(Reply.answer(chickenRice))
        const first = yield* Effect.fork(analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey }))
        yield* model.awaitRequests(before + 1)
        const others = yield* Effect.all(
          Array.from({ length: 3 }, () => Effect.flatMap(client(key), (c) => analyzeFood(c, { ...image, idempotency_key: idempotencyKey }))),
          { concurrency: "unbounded" }
        )
        expect(others.map((r) => [r.isError, toolErrorCode(r)])).toEqual(Array.from({ length: 3 }, () => [true, "in_progress"]))
        model.resume()
        const done = yield* Fiber.join(first)
        expect(done.structuredContent).toMatchObject({ dish_name: "Grilled chicken with rice" })
        expect(model.requests.length - before).toBe(1)
        expect(yield* balance(key)).toBe(499)
      }))

    it.scoped("invalid input: a tool error with the REST error code for each case, nothing charged, no model call", () =>
      Effect.gen(function* () {
        const { model } = yield* Service
        const key = yield* buyKey(500)
        const mcp = yield* client(key)
        const before = model.requests.length
        const png = yield* Effect.promise(() => makeImage(32, 32, "png"))
        const tiny = yield* Effect.promise(() => makeImage(8, 8, "png"))
        const cases: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
          ["invalid_request", { mime_type: "image/jpeg" }],
          ["invalid_request", { ...image, mime_type: "image/gif" }],
          ["invalid_request", { ...image, language: "de" }],
          ["invalid_request", { ...image, known_total_grams: 0 }],
          ["invalid_request", { ...image, known_total_grams: 12.345 }],
          ["invalid_request", { ...image, colour: "red" }],
          ["invalid_base64", { ...image, image_base64: "not base64!" }],
          ["mime_mismatch", { image_base64: png.base64, mime_type: "image/jpeg" }],
          ["image_dimensions", { image_base64: tiny.base64, mime_type: "image/png" }],
          ["image_too_large", { image_base64: "A".repeat(2_666_672), mime_type: "image/jpeg" }]
        ]
        for (const [code, args] of cases) {
          const idempotencyKey = idem()
          const result = yield* analyzeFood(mcp, { ...args, idempotency_key: idempotencyKey })
          expect([result.isError, toolErrorCode(result)], JSON.stringify(result.structuredContent)).toEqual([true, code])
          expect(firstText(result)).toEqual(result.structuredContent)
          const { image_base64, mime_type, ...others } = args
          const overRest = yield* restCall("/v1/analyze", key, { image_base64, mime_type, ...others }, { "idempotency-key": idempotencyKey })
          expect(errorCode(overRest)).toBe(code)
        }
        const badKey = yield* analyzeFood(mcp, { ...image, idempotency_key: "short" })
        expect(toolErrorCode(badKey)).toBe("invalid_request")
        expect(badKey.structuredContent).toMatchObject({ error: { issues: [{ path: ["idempotency_key"] }] } })
        expect(model.requests.length).toBe(before)
        expect(yield* balance(key)).toBe(500)
      }))

    it.scoped("funding refusals are tool errors: no key, unknown key, no credits; nothing reaches the model", () =>
      Effect.gen(function* () {
        const { model } = yield* Service
        const before = model.requests.length
        const anonymous = yield* analyzeFood(yield* client(), { ...image, idempotency_key: idem() })
        // x402 is off on this server: the 402 names it and carries no challenge.
        expect([anonymous.isError, toolErrorCode(anonymous)]).toEqual([true, "x402_unavailable"])
        expect(anonymous.structuredContent).not.toHaveProperty("accepts")

        const stranger = yield* analyzeFood(yield* client(newCreditKey(true)), { ...image, idempotency_key: idem() })
        expect([stranger.isError, toolErrorCode(stranger)]).toEqual([true, "invalid_key"])

        const empty = yield* buyKey(0)
        const broke = yield* analyzeFood(yield* client(empty), { ...image, idempotency_key: idem() })
        expect([broke.isError, toolErrorCode(broke)]).toEqual([true, "insufficient_credits"])
        expect(model.requests.length).toBe(before)
      }))

    it.scoped("analysis failures keep their REST codes and request_id, and return the reserved credit", () =>
      Effect.gen(function* () {
        const { model } = yield* Service
        const key = yield* buyKey(500)
        const mcp = yield* client(key)
        model.enqueue(Reply.answer(noFood), Reply.content("this is not JSON"))
        const none = yield* analyzeFood(mcp, { ...image, idempotency_key: idem() })
        expect([none.isError, toolErrorCode(none)]).toEqual([true, "no_food_detected"])
        expect(none.structuredContent).toMatchObject({ error: { request_id: expect.any(String) } })
        const failed = yield* analyzeFood(mcp, { ...image, idempotency_key: idem() })
        expect([failed.isError, toolErrorCode(failed)]).toEqual([true, "analysis_failed"])
        expect(yield* balance(key)).toBe(500)
      }))

    it.scoped("stateless transport: GET and DELETE on /mcp are 405; an unknown tool is a protocol error", () =>
      Effect.gen(function* () {
        const { url } = yield* Service
        for (const method of ["GET", "DELETE"]) {
          const answer = yield* Effect.promise(() => send(`${url}/mcp`, { method, headers: { accept: "text/event-stream" } }))
          expect(answer.status).toBe(405)
        }
        const mcp = yield* client()
        const unknown = yield* Effect.promise(() => mcp.callTool({ name: "feedback", arguments: {} }).then(() => "answered", (e: Error) => e.message))
        expect(unknown).toContain("unknown tool")
      }))
  })
})
