import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Ref, Scope } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionFailure, VisionModel } from "../../src/analysis/VisionModel.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { metricSample, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { otlpReceiver, spansOf } from "../support/otlp.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"

const noMatches = Layer.succeed(FoodDb, { matcherVersion: "test", match: () => Effect.succeedNone, ...noFoods })
const image = await makeImage(64, 48, "png")

/** A vision model that reads the meal in English and gives a broken answer in Lithuanian. */
const vision = Layer.succeed(VisionModel, {
  model: "scripted",
  analyze: (input) =>
    input.language === "lt"
      ? Effect.fail(new VisionFailure({ reason: "invalid_answer", message: "unreadable" }))
      : Effect.succeed(chickenRice)
})

const dependencies = Layer.mergeAll(vision, noMatches, FundingMemory({ alice: 5 }), LimitsUnlimited)

const analyze = (url: string, key: string, language: "en" | "lt" = "en") =>
  send(`${url}/v1/analyze`, {
    headers: { "idempotency-key": key, authorization: "Bearer memory_alice" },
    body: { image_base64: image.base64, mime_type: image.mime, language }
  })

describe("metrics", () => {
  it.scoped("off by default: /metrics is 404", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies })
      expect((yield* Effect.promise(() => send(`${url}/metrics`))).status).toBe(404)
    }), 120_000)

  it.scoped("METRICS=on: Prometheus text whose counters move with requests and analyses", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies, env: { METRICS: "on" } })
      const scrape = Effect.promise(() => send(`${url}/metrics`))
      const before = yield* scrape
      expect(before.status).toBe(200)
      expect(before.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
      expect(before.text).toContain("# TYPE morsel_credits_consumed_total counter")
      expect(before.text).toContain("# TYPE morsel_x402_pending gauge")
      const consumedBefore = metricSample(before.text, "morsel_credits_consumed_total") ?? 0
      const successBefore = metricSample(before.text, 'morsel_analyses_total{outcome="success"}') ?? 0
      const failedBefore = metricSample(before.text, 'morsel_analyses_total{outcome="analysis_failed"}') ?? 0

      expect((yield* Effect.promise(() => analyze(url, "metrics-test-key-0001"))).status).toBe(200)
      expect((yield* Effect.promise(() => analyze(url, "metrics-test-key-0002", "lt"))).status).toBe(502)
      expect((yield* Effect.promise(() => send(`${url}/health`))).status).toBe(200)

      const after = (yield* scrape).text
      expect(metricSample(after, "morsel_credits_consumed_total")).toBe(consumedBefore + 1)
      expect(metricSample(after, 'morsel_analyses_total{outcome="success"}')).toBe(successBefore + 1)
      expect(metricSample(after, 'morsel_analyses_total{outcome="analysis_failed"}')).toBe(failedBefore + 1)
      expect(metricSample(after, 'morsel_http_requests_total{route="/v1/analyze",status="502"}')).toBeGreaterThanOrEqual(1)
      expect(metricSample(after, 'morsel_http_requests_total{route="/v1/analyze",status="200"}')).toBeGreaterThanOrEqual(1)
      expect(metricSample(after, 'morsel_http_requests_total{route="/health",status="200"}')).toBeGreaterThanOrEqual(1)
      expect(metricSample(after, "morsel_x402_pending")).toBe(0)
      expect(metricSample(after, 'morsel_analysis_duration_seconds_bucket{le="+Inf"}')).toBe(metricSample(after, "morsel_analysis_duration_seconds_count"))
      expect(metricSample(after, "morsel_analysis_duration_seconds_count")).toBeGreaterThanOrEqual(2)
    }), 120_000)
})

describe("traces", () => {
  it.scoped("OTEL_EXPORTER_OTLP_ENDPOINT set: a request's spans reach the receiver, secrets redacted", () =>
    Effect.gen(function* () {
      const receiver = yield* otlpReceiver
      const serverScope = yield* Scope.make()
      const { url } = yield* startServer({ dependencies, env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } }).pipe(Scope.extend(serverScope))
      expect((yield* Effect.promise(() => analyze(url, "trace-test-key-00001"))).status).toBe(200)
      const signed = yield* Effect.promise(() =>
        send(`${url}/v1/analyze`, {
          headers: { "idempotency-key": "trace-test-key-00002", "payment-signature": "c2VjcmV0LXNpZ25hdHVyZQ" },
          body: { image_base64: image.base64, mime_type: image.mime }
        })
      )
      expect(signed.status).toBe(402)
      // Closing the server flushes the exporter.
      yield* Scope.close(serverScope, Exit.void)
      const spans = spansOf(yield* Ref.get(receiver.bodies))
      const names = spans.map((s) => s.name)
      expect(names).toContain("http.server POST")
      expect(names.some((n) => n.startsWith("sql."))).toBe(true)
      const serverSpan = spans.find((s) => s.name === "http.server POST")!
      const auth = serverSpan.attributes.find((a) => a.key === "http.request.header.authorization")
      expect(auth?.value).toEqual({ stringValue: "<redacted>" })
      expect(JSON.stringify(spans)).not.toContain("memory_alice")
      expect(JSON.stringify(spans)).not.toContain("c2VjcmV0LXNpZ25hdHVyZQ")
    }), 120_000)
})
