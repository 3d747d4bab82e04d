// What each analysis's model call used, end to end on the whole server with the fake model: the analysis's log line,
// the metrics, the admin request lookup and counters; costs only with prices set; refusals learned once per server;
// counts a column cannot hold never cost a customer the saved answer.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, Metric, Redacted } from "effect"
import { vi } from "vitest"
import { makeAdminClient } from "../../src/admin/client.ts"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { AppConfigFromEnv } from "../../src/config.ts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { modelTokens } from "../../src/observability/metrics.ts"
import { FundingLive } from "../../src/server.ts"
import { fakeStripe, rest } from "../support/clients.ts"
import { Reply, type StructuredOutputRefusal, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const TOKEN = "admin-token-for-usage-0123456789"
const photo = await makeImage(320, 240, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }
const PRICES = { MODEL_PRICE_INPUT_PER_MTOK: "0.25", MODEL_PRICE_CACHED_INPUT_PER_MTOK: "0.025", MODEL_PRICE_OUTPUT_PER_MTOK: "2" }
const USAGE = {
  prompt_tokens: 1800,
  completion_tokens: 900,
  total_tokens: 2700,
  prompt_tokens_details: { cached_tokens: 1000 },
  completion_tokens_details: { reasoning_tokens: 500 }
}
// 800 × 0.25 + 1000 × 0.025 + 900 × 2 = 2,025 USD per million calls.
const COST = 0.002025

/** A server with admin and the fake model; the credit key holds one pack. */
const setup = (env: Record<string, string>) =>
  Effect.gen(function* () {
    const stripe = yield* fakeStripe
    const fake = yield* startFakeOpenAI()
    const { url } = yield* startServer({
      env: { ...stripe.env, OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url, ADMIN_TOKEN: TOKEN, LOG_FORMAT: "json", LOG_LEVEL: "info", ...env },
      dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited)
    })
    const admin = yield* makeAdminClient(url, Redacted.make(TOKEN))
    const key = newCreditKey(true)
    const checkout = yield* rest(url, "/v1/credits/checkout", key, { order_id: crypto.randomUUID() })
    const sessionId = String((checkout.body as Record<string, unknown>)["session_id"])
    stripe.pay(sessionId)
    expect((yield* rest(url, "/v1/credits/confirm", key, { session_id: sessionId })).status).toBe(200)
    const analyze = (idempotencyKey: string) => rest(url, "/v1/analyze", key, body, { "idempotency-key": idempotencyKey })
    return { fake, admin, analyze }
  })

const tokensMetric = (kind: string) =>
  Effect.map(Metric.value(Metric.tagged(modelTokens, "kind", kind)), (s) => s.count)

describe("model usage", () => {
  it.scopedLive("with prices: tokens and cost in the log line, the metrics, the request lookup, and a margin in the counters", () =>
    Effect.gen(function* () {
      const logged = vi.spyOn(console, "error")
      const { fake, admin, analyze } = yield* setup(PRICES)
      const before = { prompt: yield* tokensMetric("prompt"), reasoning: yield* tokensMetric("reasoning") }
      fake.enqueue(Reply.answer(chickenRice, { usage: USAGE }), Reply.content("not a meal", { usage: USAGE }))
      const paid = yield* analyze("usage-paid-000001")
      expect(paid.status).toBe(200)
      const failed = yield* analyze("usage-failed-00001")
      expect(failed.status).toBe(502)

      const line = logged.mock.calls
        .map((args) => String(args[0]))
        .filter((text) => text.includes('"analysis finished"'))
        .map((text) => JSON.parse(text) as { annotations: Record<string, unknown> })
        .find((entry) => entry.annotations["outcome"] === "success")
      logged.mockRestore()
      expect(line?.annotations).toMatchObject({
        model_prompt_tokens: 1800,
        model_completion_tokens: 900,
        model_reasoning_tokens: 500,
        model_cached_tokens: 1000,
        model_output: "json_schema",
        model_cost_usd: COST
      })

      expect((yield* tokensMetric("prompt")) - before.prompt).toBe(3600)
      expect((yield* tokensMetric("reasoning")) - before.reasoning).toBe(1000)

      const requestId = String((paid.body as Record<string, unknown>)["request_id"])
      expect((yield* admin.LookupRequest({ request_id: requestId })).model_call).toEqual({
        tokens: { prompt: 1800, completion: 900, reasoning: 500, cached: 1000 },
        seconds: expect.any(Number),
        output: "json_schema",
        cost_usd: COST
      })
      // The unusable answer cost as much and earned nothing: the margin counts both calls against one sale.
      const counters = yield* admin.Counters()
      expect(counters.model).toMatchObject({
        calls_last_24h: 2,
        tokens_last_24h: { prompt: 3600, completion: 1800, reasoning: 1000, cached: 2000 },
        priced_calls_last_24h: 2,
        cost_usd_last_24h: 2 * COST,
        revenue_usd_last_24h: 0.01,
        margin_usd_last_24h: 0.01 - 2 * COST
      })
    }), 120_000)

  it.scopedLive("without prices: tokens only, no cost and no margin anywhere; absent counts stay absent", () =>
    Effect.gen(function* () {
      const { fake, admin, analyze } = yield* setup({})
      fake.enqueue(Reply.answer(chickenRice, { usage: { prompt_tokens: 1200, completion_tokens: 300 } }))
      const paid = yield* analyze("usage-unpriced-001")
      expect(paid.status).toBe(200)
      const lookup = yield* admin.LookupRequest({ request_id: String((paid.body as Record<string, unknown>)["request_id"]) })
      expect(lookup.model_call).toEqual({ tokens: { prompt: 1200, completion: 300 }, seconds: expect.any(Number), output: "json_schema" })
      const counters = yield* admin.Counters()
      expect(counters.model).toEqual({ calls_last_24h: 1, tokens_last_24h: { prompt: 1200, completion: 300 }, priced_calls_last_24h: 0 })
    }), 120_000)

  it.scopedLive("counts a database column cannot hold (a fraction, more than 2³¹) are kept as not reported; the customer's answer is saved", () =>
    Effect.gen(function* () {
      const { fake, admin, analyze } = yield* setup({})
      fake.enqueue(Reply.answer(chickenRice, { usage: { prompt_tokens: 1.5, completion_tokens: 3_000_000_000 } }))
      const paid = yield* analyze("usage-hostile-0001")
      expect(paid.status).toBe(200)
      expect(yield* analyze("usage-hostile-0001")).toMatchObject({ status: 200, body: paid.body })
      const lookup = yield* admin.LookupRequest({ request_id: String((paid.body as Record<string, unknown>)["request_id"]) })
      expect(lookup.model_call).toEqual({ tokens: {}, seconds: expect.any(Number), output: "json_schema" })
    }), 120_000)
})

/** The live model against one fake, with the log lines it writes kept. */
const liveModel = (url: string, env: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    const logger = Logger.make(({ message }) => {
      lines.push(String(Array.isArray(message) ? message.join(" ") : message))
    })
    const model = yield* VisionModel.pipe(
      Effect.provide(VisionModelLive.pipe(Layer.provide(AppConfigFromEnv({ OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: url, ...env })))),
      Effect.orDie
    )
    const analyze = () =>
      model.analyze({ image: new Uint8Array(Buffer.from(photo.base64, "base64")), mime: "image/jpeg", language: "en" }).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
    return { analyze, lines }
  })

describe("servers without strict structured output", () => {
  for (const kind of ["openai", "vllm", "ollama", "llamacpp"] satisfies ReadonlyArray<StructuredOutputRefusal>) {
    it.scopedLive(`${kind}: falls back to JSON mode once, says so once, and asks that way from then on`, () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.refuseStructuredOutput(kind)
        fake.setFallback(Reply.answer(chickenRice))
        const { analyze, lines } = yield* liveModel(fake.url)
        expect(yield* analyze()).toEqual(chickenRice)
        expect(yield* analyze()).toEqual(chickenRice)
        expect(yield* analyze()).toEqual(chickenRice)
        // One refused request, then JSON mode with the schema in the instruction for every analysis.
        expect(fake.requests.map((r) => (r.responseFormat as { type?: string }).type)).toEqual(["json_schema", "json_object", "json_object", "json_object"])
        expect(fake.requests[1]?.userText).toContain("follows this JSON schema")
        expect(lines.filter((line) => line.includes("refused strict structured output"))).toHaveLength(1)
      }), 60_000)
  }

  it.scopedLive("an answer in JSON mode is checked exactly as before: one that breaks the rules is still a failure", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.refuseStructuredOutput("ollama")
      fake.enqueue(Reply.answer({ ...chickenRice, items: [{ ...chickenRice.items[0], estimated_grams: -5 }] }))
      const { analyze } = yield* liveModel(fake.url)
      const failure = yield* Effect.flip(analyze())
      expect(failure).toMatchObject({ reason: "invalid_answer" })
    }), 60_000)

  it.scopedLive("a refused parameter is dropped once, named in the log, and never sent again", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.refuseParameter("max_completion_tokens")
      fake.setFallback(Reply.answer(chickenRice))
      const { analyze, lines } = yield* liveModel(fake.url, { VISION_MAX_OUTPUT_TOKENS: "2000" })
      yield* analyze()
      yield* analyze()
      expect(fake.requests.map((r) => (r.body as Record<string, unknown>)["max_completion_tokens"])).toEqual([2000, undefined, undefined])
      expect(lines.filter((line) => line.includes("refused max_completion_tokens") && line.includes("VISION_MAX_OUTPUT_TOKENS"))).toHaveLength(1)
    }), 60_000)
})
