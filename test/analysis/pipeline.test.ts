// POST /v1/analyze end to end: the real openai client against a fake model, a real database, in-memory funding.
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import sharp from "sharp"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { decodeDataUrl, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { errorCode, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice, modelItem, noFood } from "../support/meals.ts"
import { startServer } from "../support/server.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"

const OLIVE_OIL = { fdcId: "171413", name: "Oil, olive, salad or cooking", per100g: { kcal: 884, protein_g: 0, carbs_g: 0, fat_g: 100 } }

/** A one-record food database: olive oil is matched, everything else keeps the model's numbers. */
const oliveOilOnly = Layer.succeed(FoodDb, {
  matcherVersion: "test-matcher-1",
  match: ({ query }) => Effect.succeed(query === "oil, olive" ? Option.some(OLIVE_OIL) : Option.none()),
  ...noFoods
})

const KEY = "Bearer memory_alice"

/** A server with a fake model and 5 credits for alice. */
const setup = (env: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const fake = yield* startFakeOpenAI()
    const funding = yield* Layer.build(FundingMemory({ alice: 5 }))
    const { url } = yield* startServer({
      env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url, VISION_MODEL: "fake-vision-1", ...env },
      dependencies: Layer.mergeAll(VisionModelLive, oliveOilOnly, Layer.succeedContext(funding), LimitsUnlimited)
    })
    const ledger = Context.get(funding, FundingMemoryLedger)
    const analyze = (body: Record<string, unknown>, idempotencyKey = "pipeline-key-000001", headers: Record<string, string> = { authorization: KEY }) =>
      Effect.promise(() => send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": idempotencyKey, ...headers } }))
    return { fake, url, ledger, analyze }
  })

const photo = await makeImage(640, 480, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }

const expectNothingConsumed = (ledger: Context.Tag.Service<typeof FundingMemoryLedger>) =>
  Effect.gen(function* () {
    expect(yield* ledger.balances).toEqual({ alice: 5 })
    expect(yield* ledger.reserved).toBe(0)
  })

describe("POST /v1/analyze", () => {
  it.scoped("a normal meal: items, USDA match, totals, one credit consumed, replay with the same key", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger } = yield* setup()
      fake.enqueue(Reply.answer(chickenRice))
      const first = yield* analyze(body)
      expect(first.status, first.text).toBe(200)
      expect(first.headers.get("payment-response")).toBeNull()
      expect(first.body).toMatchObject({
        dish_name: "Grilled chicken with rice",
        estimate: true,
        model: "fake-vision-1",
        matcher_version: "test-matcher-1",
        estimated_total_grams: 340,
        totals: { kcal: 247.5 + 234 + 88.4, protein_g: 46.5 + 4.9, carbs_g: 50.4, fat_g: 5.4 + 0.5 + 10 },
        items: [
          { name: "Grilled chicken breast", nutrition_source: "ai", fdc_id: null, matched_name: null, estimated_grams: 150, model_confidence: 0.85, nutrition: { kcal: 247.5 } },
          { name: "White rice", nutrition_source: "ai", estimated_grams: 180 },
          { name: "Olive oil", nutrition_source: "usda", fdc_id: "171413", matched_name: OLIVE_OIL.name, per_100g: OLIVE_OIL.per100g, nutrition: { kcal: 88.4, fat_g: 10 } }
        ]
      })
      expect(first.body).not.toHaveProperty("portion_basis")
      expect(yield* ledger.balances).toEqual({ alice: 4 })
      const again = yield* analyze(body)
      expect(again.status).toBe(200)
      expect(again.body).toEqual(first.body)
      expect(fake.requests).toHaveLength(1)
      expect(yield* ledger.balances).toEqual({ alice: 4 })
    }))

  it.scoped("known_total_grams allocates the supplied total by photo proportions", () =>
    Effect.gen(function* () {
      const { analyze, fake } = yield* setup()
      fake.enqueue(Reply.answer(chickenRice))
      const answer = yield* analyze({ ...body, known_total_grams: 400 })
      expect(answer.status, answer.text).toBe(200)
      const result = answer.body as { items: Array<{ estimated_grams: number }>; estimated_total_grams: number; portion_basis: unknown }
      expect(result.portion_basis).toEqual({ type: "supplied_total", total_grams: 400, allocation: "photo_estimated_proportions" })
      expect(result.items.map((i) => i.estimated_grams)).toEqual([176.47, 211.76, 11.77])
      expect(result.estimated_total_grams).toBe(400)
    }))

  it.scoped("no food → 422, nothing consumed; the same key may be retried", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger } = yield* setup()
      fake.enqueue(Reply.answer(noFood), Reply.answer(chickenRice))
      const answer = yield* analyze(body)
      expect(answer.status).toBe(422)
      expect(errorCode(answer)).toBe("no_food_detected")
      expect(answer.body).toMatchObject({ error: { request_id: expect.any(String) } })
      yield* expectNothingConsumed(ledger)
      const retry = yield* analyze(body)
      expect(retry.status).toBe(200)
    }))

  it.scoped("invalid or rule-breaking model answers → 502, nothing consumed", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger } = yield* setup()
      const tooMany = { ...chickenRice, items: Array.from({ length: 21 }, (_, i) => modelItem(`item ${i}`, "apple, raw", 10, [52, 0.3, 14, 0.2])) }
      const overConfident = { ...chickenRice, items: [modelItem("Apple", "apple, raw", 100, [52, 0.3, 14, 0.2], 1.5)] }
      const negative = { ...chickenRice, items: [modelItem("Apple", "apple, raw", -100, [52, 0.3, 14, 0.2])] }
      fake.enqueue(Reply.content("this is not JSON"), Reply.answer(tooMany), Reply.answer(overConfident), Reply.answer(negative))
      for (let i = 0; i < 4; i++) {
        const answer = yield* analyze(body)
        expect(answer.status, answer.text).toBe(502)
        expect(errorCode(answer)).toBe("analysis_failed")
      }
      yield* expectNothingConsumed(ledger)
    }))

  it.scopedLive("500s then success within the deadline → 200", () =>
    Effect.gen(function* () {
      const { analyze, fake } = yield* setup()
      fake.enqueue(Reply.status(500), Reply.status(503), Reply.answer(chickenRice))
      const answer = yield* analyze(body)
      expect(answer.status, answer.text).toBe(200)
      expect(fake.requests).toHaveLength(3)
    }))

  it.scopedLive("a slow model hits ANALYSIS_TIMEOUT_MS → 504, nothing consumed", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger } = yield* setup({ ANALYSIS_TIMEOUT_MS: "400" })
      fake.enqueue(Reply.hang())
      const answer = yield* analyze(body)
      expect(answer.status, answer.text).toBe(504)
      expect(errorCode(answer)).toBe("analysis_timeout")
      yield* expectNothingConsumed(ledger)
    }))

  it.scoped("no OPENAI_API_KEY → 503 model_unavailable, nothing consumed", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger } = yield* setup({ OPENAI_API_KEY: "" })
      const answer = yield* analyze(body)
      expect(answer.status, answer.text).toBe(503)
      expect(errorCode(answer)).toBe("model_unavailable")
      // Retrying cannot help until the operator sets the key: no Retry-After, and the setting is named.
      expect(answer.headers.get("retry-after")).toBeNull()
      expect(answer.text).toContain("OPENAI_API_KEY")
      expect(fake.requests).toHaveLength(0)
      yield* expectNothingConsumed(ledger)
    }))

  it.scoped("a Lithuanian request reaches the model and names come back as given", () =>
    Effect.gen(function* () {
      const { analyze, fake } = yield* setup()
      fake.enqueue(Reply.answer({ ...chickenRice, dish_name: "Vištiena su ryžiais", items: [modelItem("Kepta vištienos krūtinėlė", "chicken breast, grilled", 150, [165, 31, 0, 3.6])] }))
      const answer = yield* analyze({ ...body, language: "lt" })
      expect(answer.status, answer.text).toBe(200)
      expect(answer.body).toMatchObject({ dish_name: "Vištiena su ryžiais", items: [{ name: "Kepta vištienos krūtinėlė", query: "chicken breast, grilled" }] })
      expect(fake.requests[0]!.userText.toLowerCase()).toContain("lithuanian")
    }))

  it.scoped("a 2000×1500 photo reaches the model downscaled to 1024×768", () =>
    Effect.gen(function* () {
      const { analyze, fake } = yield* setup()
      const big = yield* Effect.promise(() => makeImage(2000, 1500, "jpeg"))
      fake.enqueue(Reply.answer(chickenRice))
      const answer = yield* analyze({ image_base64: big.base64, mime_type: big.mime })
      expect(answer.status).toBe(200)
      const sent = decodeDataUrl(fake.requests[0]!.imageUrls[0]!)
      const meta = yield* Effect.promise(() => sharp(sent.bytes).metadata())
      expect([meta.width, meta.height]).toEqual([1024, 768])
    }))

  it.scoped("idempotency: same key with another input → 409 idempotency_conflict; while running → 409 in_progress", () =>
    Effect.gen(function* () {
      const { analyze, fake } = yield* setup()
      fake.pause()
      fake.enqueue(Reply.answer(chickenRice))
      const running = yield* Effect.fork(analyze(body))
      yield* fake.awaitRequests(1)
      const during = yield* analyze(body)
      expect(during.status).toBe(409)
      expect(errorCode(during)).toBe("in_progress")
      const other = yield* analyze({ ...body, language: "lt" })
      expect(other.status).toBe(409)
      expect(errorCode(other)).toBe("idempotency_conflict")
      fake.resume()
      const done = yield* running.await
      expect(done._tag).toBe("Success")
      const conflict = yield* analyze({ ...body, known_total_grams: 300 })
      expect(errorCode(conflict)).toBe("idempotency_conflict")
    }))

  it.scoped("insufficient credits → 402 and no model call", () =>
    Effect.gen(function* () {
      const { analyze, fake } = yield* setup()
      fake.setFallback(Reply.answer(chickenRice))
      for (let i = 0; i < 5; i++) expect((yield* analyze(body, `spend-all-credits-${i}`)).status).toBe(200)
      const broke = yield* analyze(body, "spend-all-credits-6")
      expect(broke.status).toBe(402)
      expect(errorCode(broke)).toBe("insufficient_credits")
      expect(fake.requests).toHaveLength(5)
    }))

  it.scoped("20 parallel identical requests → one model call, one result, the others 409 in_progress or the replay", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger } = yield* setup()
      fake.pause()
      fake.enqueue(Reply.answer(chickenRice))
      const all = yield* Effect.fork(Effect.all(Array.from({ length: 20 }, () => analyze(body, "parallel-identical-1")), { concurrency: "unbounded" }))
      yield* fake.awaitRequests(1)
      fake.resume()
      const answers = yield* all.await.pipe(Effect.flatten)
      const ok = answers.filter((a) => a.status === 200)
      const busy = answers.filter((a) => a.status === 409 && errorCode(a) === "in_progress")
      expect(ok.length + busy.length).toBe(20)
      expect(ok.length).toBeGreaterThanOrEqual(1)
      expect(new Set(ok.map((a) => a.text)).size).toBe(1)
      expect(fake.requests).toHaveLength(1)
      expect(yield* ledger.balances).toEqual({ alice: 4 })
    }))

  it.scopedLive("a caller who hangs up does not cancel the analysis: the retry replays it, one credit, one model call", () =>
    Effect.gen(function* () {
      const { fake, ledger, url } = yield* setup()
      fake.pause()
      fake.enqueue(Reply.answer(chickenRice))
      const controller = new AbortController()
      const abandoned = fetch(`${url}/v1/analyze`, {
        method: "POST",
        signal: controller.signal,
        headers: { "content-type": "application/json", "idempotency-key": "hang-up-then-retry-1", authorization: KEY },
        body: JSON.stringify(body)
      }).catch(() => "aborted")
      yield* fake.awaitRequests(1)
      controller.abort()
      expect(yield* Effect.promise(() => abandoned)).toBe("aborted")
      fake.resume()
      yield* fake.waitUntil(() => fake.requests.every((r) => r.settled))
      let retry = yield* Effect.promise(() =>
        send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": "hang-up-then-retry-1", authorization: KEY } })
      )
      for (let i = 0; i < 50 && retry.status === 409; i++) {
        yield* Effect.sleep("20 millis")
        retry = yield* Effect.promise(() => send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": "hang-up-then-retry-1", authorization: KEY } }))
      }
      expect(retry.status, retry.text).toBe(200)
      expect(fake.requests).toHaveLength(1)
      expect(yield* ledger.balances).toEqual({ alice: 4 })
    }))
})
