import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { MAX_BODY_BYTES } from "../../src/domain/bodies.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { type Answer, errorCode, isRecord, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { Server, serverLayer } from "../support/server.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"

const noMatches = Layer.succeed(FoodDb, { matcherVersion: "test", match: () => Effect.succeedNone, ...noFoods })

const TRUSTED = "https://app.example.com"

const ServerUnderTest = serverLayer({
  env: { TRUSTED_ORIGINS: TRUSTED },
  dependencies: Layer.mergeAll(VisionModelLive, noMatches, FundingMemory({}), LimitsUnlimited)
})

const call = (path: string, init?: Parameters<typeof send>[1]) =>
  Effect.flatMap(Server, ({ url }) => Effect.promise(() => send(`${url}${path}`, init)))

const png = await makeImage(64, 48, "png")
const jpeg = await makeImage(64, 48, "jpeg")
const KEY = "contract-test-key-0001"

const analyze = (body: unknown, headers: Record<string, string> = {}) =>
  call("/v1/analyze", { body, headers: { "idempotency-key": KEY, ...headers } })

const validBody = { image_base64: png.base64, mime_type: png.mime }

/** A valid request without funding gets the price challenge: proof that the input was accepted. */
const expectAccepted = (answer: Answer) => {
  expect(answer.status, answer.text).toBe(402)
}
const expectRejected = (answer: Answer, status = 400, code?: string) => {
  expect(answer.status, answer.text).toBe(status)
  if (code) expect(errorCode(answer)).toBe(code)
  else expect(errorCode(answer)).toEqual(expect.any(String))
}

describe("HTTP contract", () => {
  it.layer(ServerUnderTest, { timeout: 60_000 })((it) => {
    it.effect("health, docs, OpenAPI and unknown paths", () =>
      Effect.gen(function* () {
        const health = yield* call("/health")
        expect(health.status).toBe(200)
        expect(health.body).toMatchObject({ status: "ok", payment_network: "eip155:8453", version: expect.any(String), api_version: "1.0.0" })
        const missing = yield* call("/nope")
        expect(missing.status).toBe(404)
        expect(errorCode(missing)).toBe("not_found")
        const docs = yield* call("/docs")
        expect(docs.status).toBe(200)
        expect(docs.text).toContain("openapi")
      }))

    it.effect("OpenAPI 3.1 lists every documented path with its request schema and documented statuses", () =>
      Effect.gen(function* () {
        const answer = yield* call("/openapi.json")
        expect(answer.status).toBe(200)
        const spec = answer.body
        if (!isRecord(spec) || !isRecord(spec["paths"]) || !isRecord(spec["info"])) throw new Error("not an OpenAPI document")
        expect(spec["openapi"]).toBe("3.1.0")
        expect(spec["info"]["version"]).toBe("1.0.0")
        const statuses = (path: string, method: string) => {
          const op = (spec["paths"] as Record<string, Record<string, { responses: Record<string, unknown>; requestBody?: unknown }>>)[path]?.[method]
          return { codes: Object.keys(op?.responses ?? {}).sort(), body: JSON.stringify(op?.requestBody ?? null) }
        }
        expect(statuses("/health", "get").codes).toContain("200")
        const analyzeOp = statuses("/v1/analyze", "post")
        expect(analyzeOp.codes).toEqual(["200", "400", "401", "402", "403", "409", "410", "413", "415", "422", "429", "502", "503", "504"])
        expect(analyzeOp.body).toContain("AnalyzeRequest")
        for (const [path, method, codes, schema] of [
          ["/v1/credits/balance", "get", ["200", "401", "409", "429", "503"], null],
          ["/v1/credits/checkout", "post", ["200", "400", "401", "409", "429", "503"], "CheckoutRequest"],
          ["/v1/credits/confirm", "post", ["200", "400", "401", "409", "429", "503"], "ConfirmRequest"],
          ["/v1/credits/checkout-status", "post", ["200", "400", "401", "404", "503"], "CheckoutStatusRequest"],
          ["/v1/credits/feedback", "post", ["200", "400", "401", "404", "409", "429", "503"], "FeedbackRequest"]
        ] as const) {
          const op = statuses(path, method)
          for (const code of codes) expect(op.codes, `${path} ${code}`).toContain(code)
          if (schema) expect(op.body).toContain(schema)
        }
        const analyzeDoc = JSON.stringify((spec["paths"] as Record<string, Record<string, unknown>>)["/v1/analyze"]?.["post"])
        expect(analyzeDoc).toContain('"security":[{},{"bearer":[]}]')
        expect(analyzeDoc).toContain("PAYMENT-REQUIRED")
        expect(analyzeDoc).toContain("PAYMENT-RESPONSE")
        expect(analyzeDoc).toContain("Retry-After")
        expect(analyzeDoc).not.toContain('"name":"authorization"')
        const schemas = JSON.stringify(spec["components"])
        expect(schemas).toContain("\"additionalProperties\":false")
        expect(schemas).toContain("^[A-Za-z0-9_-]{16,128}$")
      }))

    it.effect("analysis request body fields: each rule rejects and accepts", () =>
      Effect.gen(function* () {
        expectAccepted(yield* analyze(validBody))
        expectAccepted(yield* analyze({ image_base64: jpeg.base64, mime_type: "image/jpeg" }))
        expectRejected(yield* analyze({ mime_type: png.mime }))
        expectRejected(yield* analyze({ image_base64: png.base64 }))
        expectRejected(yield* analyze({ ...validBody, mime_type: "image/gif" }))
        expectAccepted(yield* analyze({ ...validBody, language: "lt" }))
        expectAccepted(yield* analyze({ ...validBody, language: "en" }))
        expectRejected(yield* analyze({ ...validBody, language: "de" }))
        for (const grams of [1, 5000, 12.34, 250.5]) expectAccepted(yield* analyze({ ...validBody, known_total_grams: grams }))
        for (const grams of [0.99, 5000.01, 12.345, -3, 0, "12"]) expectRejected(yield* analyze({ ...validBody, known_total_grams: grams }))
        expectRejected(yield* analyze({ ...validBody, extra: true }), 400, "invalid_request")
        expectRejected(yield* analyze([]), 400, "invalid_request")
      }))

    it.effect("image rules: base64, format, size, dimensions", () =>
      Effect.gen(function* () {
        expectRejected(yield* analyze({ ...validBody, image_base64: "not base64!" }), 400, "invalid_base64")
        expectRejected(yield* analyze({ ...validBody, image_base64: `data:image/png;base64,${png.base64}` }), 400, "invalid_base64")
        expectRejected(yield* analyze({ ...validBody, mime_type: "image/jpeg" }), 400, "mime_mismatch")
        expectRejected(yield* analyze({ ...validBody, image_base64: Buffer.from("GIF89a-not-an-image").toString("base64") }), 400, "unsupported_image")
        const tiny = yield* Effect.promise(() => makeImage(15, 40, "png"))
        expectRejected(yield* analyze({ image_base64: tiny.base64, mime_type: tiny.mime }), 400, "image_dimensions")
        const smallest = yield* Effect.promise(() => makeImage(16, 16, "png"))
        expectAccepted(yield* analyze({ image_base64: smallest.base64, mime_type: smallest.mime }))
        const tooWide = yield* Effect.promise(() => makeImage(2049, 16, "jpeg"))
        expectRejected(yield* analyze({ image_base64: tooWide.base64, mime_type: tooWide.mime }), 400, "image_dimensions")
        expectRejected(yield* analyze({ ...validBody, image_base64: "A".repeat(2_666_672) }), 413, "image_too_large")
        const padded = Buffer.concat([png.bytes, Buffer.alloc(2_000_001 - png.bytes.length)])
        expectRejected(yield* analyze({ ...validBody, image_base64: padded.toString("base64") }), 413, "image_too_large")
      }))

    it.effect("analysis headers: Idempotency-Key, Content-Type, Authorization", () =>
      Effect.gen(function* () {
        expectRejected(yield* call("/v1/analyze", { body: validBody }), 400, "invalid_request")
        for (const key of ["a".repeat(16), "A-b_9".repeat(25) + "xyz", "x".repeat(128)]) {
          expectAccepted(yield* analyze(validBody, { "idempotency-key": key }))
        }
        for (const key of ["a".repeat(15), "x".repeat(129), "has.dot.in.the.key", "spaces are not ok!"]) {
          expectRejected(yield* analyze(validBody, { "idempotency-key": key }), 400, "invalid_request")
        }
        const json = JSON.stringify(validBody)
        expectRejected(yield* call("/v1/analyze", { rawBody: json, headers: { "idempotency-key": KEY, "content-type": "text/plain" } }), 415, "unsupported_media_type")
        expectRejected(yield* call("/v1/analyze", { rawBody: json, headers: { "idempotency-key": KEY } }), 415)
        expectAccepted(yield* call("/v1/analyze", { rawBody: json, headers: { "idempotency-key": KEY, "content-type": "application/json; charset=utf-8" } }))
        expectRejected(yield* call("/v1/analyze", { rawBody: "{not json", headers: { "idempotency-key": KEY, "content-type": "application/json" } }), 400)
        expectRejected(yield* analyze(validBody, { authorization: "Bearer morsel_live_unknown" }), 401, "invalid_key")
      }))

    it.effect("a 3 MB body gets 413 and nothing else", () =>
      Effect.gen(function* () {
        const huge = JSON.stringify({ ...validBody, image_base64: "A".repeat(3_000_000) })
        expect(huge.length).toBeGreaterThan(MAX_BODY_BYTES)
        expectRejected(yield* call("/v1/analyze", { rawBody: huge, headers: { "idempotency-key": KEY, "content-type": "application/json" } }), 413, "request_too_large")
        const health = yield* call("/health")
        expect(health.status).toBe(200)
      }))

    it.effect("browser origins: untrusted 403, trusted allowed with CORS, no Origin allowed", () =>
      Effect.gen(function* () {
        const untrusted = yield* analyze(validBody, { origin: "https://evil.example" })
        expectRejected(untrusted, 403, "untrusted_origin")
        expectRejected(yield* call("/health", { headers: { origin: "https://evil.example" } }), 403, "untrusted_origin")
        const trusted = yield* analyze(validBody, { origin: TRUSTED })
        expectAccepted(trusted)
        expect(trusted.headers.get("access-control-allow-origin")).toBe(TRUSTED)
        expect(trusted.headers.get("access-control-expose-headers")).toContain("PAYMENT-REQUIRED")
        expect(trusted.headers.get("access-control-expose-headers")).toContain("Retry-After")
        const preflight = yield* call("/v1/analyze", {
          method: "OPTIONS",
          headers: { origin: TRUSTED, "access-control-request-method": "POST", "access-control-request-headers": "idempotency-key, payment-signature" }
        })
        expect(preflight.status).toBe(204)
        expect(preflight.headers.get("access-control-allow-headers")).toContain("PAYMENT-SIGNATURE")
        const badPreflight = yield* call("/v1/analyze", { method: "OPTIONS", headers: { origin: "https://evil.example" } })
        expect(badPreflight.status).toBe(403)
      }))

    it.effect("credit endpoints (checkout, feedback) validate their bodies", () =>
      Effect.gen(function* () {
        const auth = { authorization: `Bearer morsel_live_${"a".repeat(64)}` }
        expectRejected(yield* call("/v1/credits/checkout", { body: { order_id: "not-a-uuid" }, headers: auth }), 400)
        expectRejected(yield* call("/v1/credits/checkout", { body: { order_id: crypto.randomUUID(), context: { channel: "tv" } }, headers: auth }), 400)
        expectRejected(yield* call("/v1/credits/checkout", { body: { order_id: crypto.randomUUID(), extra: 1 }, headers: auth }), 400)
        expectRejected(yield* call("/v1/credits/confirm", { body: { session_id: "cs_live_" }, headers: auth }), 400)
        expectRejected(yield* call("/v1/credits/confirm", { body: { session_id: "pi_live_abc" }, headers: auth }), 400)
        expectRejected(yield* call("/v1/credits/feedback", { body: { request_id: crypto.randomUUID(), category: "great" }, headers: auth }), 400)
        expectRejected(
          yield* call("/v1/credits/feedback", { body: { request_id: crypto.randomUUID(), category: "other", note: "x".repeat(501) }, headers: auth }),
          400
        )
        expectRejected(yield* call("/v1/credits/checkout-status", { body: { order_id: crypto.randomUUID(), more: 1 }, headers: auth }), 400)
      }))
  })
})
