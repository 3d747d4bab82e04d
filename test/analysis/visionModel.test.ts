// The live vision model, driven by the real openai client against a fake OpenAI-compatible server.
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Data, Effect, Exit, Fiber, Layer, Option, Schema, TestClock } from "effect"
import sharp from "sharp"
import { type ModelAnswer, ModelAnswerSchema, type VisionFailure, type VisionInput, VisionModel } from "../../src/analysis/VisionModel.ts"
import { ANSWER_JSON_SCHEMA, ANSWER_SCHEMA_NAME, MAX_PROVIDER_RETRIES, VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { AppConfigFromEnv } from "../../src/config.ts"
import { decodeDataUrl, type FakeOpenAI, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { chickenRice, modelItem, noFood } from "../support/meals.ts"

const MODEL = "fake-vision-1"

const vision = (fake: FakeOpenAI, env: Record<string, string> = {}) =>
  VisionModel.pipe(
    Effect.provide(
      VisionModelLive.pipe(
        Layer.provide(AppConfigFromEnv({ OPENAI_API_KEY: "sk-fake-key", OPENAI_BASE_URL: fake.url, VISION_MODEL: MODEL, ...env }))
      )
    ),
    Effect.orDie
  )

const photo = (width: number, height: number, format: "jpeg" | "png" = "jpeg") =>
  Effect.promise(async () => {
    const canvas = sharp({ create: { width, height, channels: 3, background: { r: 210, g: 160, b: 90 } } })
    return new Uint8Array(await (format === "jpeg" ? canvas.jpeg() : canvas.png()).toBuffer())
  })

const input = (image: Uint8Array, language: VisionInput["language"] = "en", mime: VisionInput["mime"] = "image/jpeg"): VisionInput => ({
  image,
  mime,
  language
})


/** Exactly the contract's fields, nothing more. */
const meal = chickenRice

class CallerTimeout extends Data.TaggedError("CallerTimeout") {}

/** Expects the effect to fail with a VisionFailure and returns it. */
const failure = <A>(effect: Effect.Effect<A, VisionFailure>) =>
  Effect.flip(effect).pipe(Effect.tap((e) => expect(e._tag).toBe("VisionFailure")))

/**
 * Runs an effect that waits both on real HTTP and on TestClock sleeps: whenever it is asleep in a backoff
 * (a pending sleep other than `deadlines`), the test clock jumps to that wake-up; otherwise it lets real I/O
 * happen. Returns the exit and the backoff delays the effect slept.
 */
const throughBackoff = <A, E>(effect: Effect.Effect<A, E>, deadlines: ReadonlyArray<number> = []) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.fork(effect)
    const delays: Array<number> = []
    for (;;) {
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) return { exit: done.value, delays }
      const now = yield* TestClock.currentTimeMillis
      const backoffs = Chunk.toReadonlyArray(yield* TestClock.sleeps()).filter((t) => !deadlines.includes(t))
      if (backoffs.length > 0) {
        const next = Math.min(...backoffs)
        delays.push(next - now)
        yield* TestClock.adjust(next - now)
      } else {
        yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
      }
    }
  })

describe("VisionModelLive", () => {
  it.scoped("reads a normal meal and sends the contract's request", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.enqueue(Reply.answer(meal))
      const model = yield* vision(fake)
      const answer = yield* model.analyze(input(yield* photo(640, 480)))

      expect(answer).toEqual(meal)
      expect(model.model).toBe(MODEL)
      expect(fake.requests).toHaveLength(1)
      const [request] = fake.requests
      expect(request?.path).toBe("/v1/chat/completions")
      expect(request?.headers.authorization).toBe("Bearer sk-fake-key")
      expect(request?.model).toBe(MODEL)
      expect(request?.responseFormat).toEqual({
        type: "json_schema",
        json_schema: { name: ANSWER_SCHEMA_NAME, strict: true, schema: ANSWER_JSON_SCHEMA }
      })
      expect(request?.userText).toMatch(/in English/)
      expect(request?.userText).toMatch(/oil, butter/)
      expect(request?.imageUrls).toHaveLength(1)
      expect(request?.imageUrls[0]).toMatch(/^data:image\/jpeg;base64,/)
    }))

  it.scoped("accepts 'no food' as a valid answer", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.enqueue(Reply.answer(noFood))
      const answer = yield* (yield* vision(fake)).analyze(input(yield* photo(64, 64)))
      expect(answer).toEqual(noFood)
    }))

  it.scoped("ignores fields beyond the contract and trims names", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      const first = meal.items[0]
      fake.enqueue(
        Reply.answer({ ...meal, notes: "extra", items: [{ ...first, name: "  Grilled chicken breast ", cooking: "grilled" }] })
      )
      const answer = yield* (yield* vision(fake)).analyze(input(yield* photo(64, 64)))
      expect(answer.items).toEqual([first])
    }))

  it.scoped("a Lithuanian request asks for Lithuanian and names come back as given", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      const lithuanian = {
        food_detected: true,
        dish_name: "Cepelinai su spirgučiais",
        items: [
          modelItem("Cepelinai", "potato dumplings, meat filled, boiled", 300, [150, 6, 22, 4]),
          modelItem("Grietinė", "sour cream", 40, [193, 2.4, 4.6, 19]),
          modelItem("Spirgučiai su svogūnais", "bacon, pan-fried", 25, [540, 37, 1.4, 42])
        ]
      }
      fake.enqueue(Reply.answer(lithuanian))
      const answer = yield* (yield* vision(fake)).analyze(input(yield* photo(64, 64), "lt"))

      expect(answer.dish_name).toBe("Cepelinai su spirgučiais")
      expect(answer.items.map((i) => i.name)).toEqual(["Cepelinai", "Grietinė", "Spirgučiai su svogūnais"])
      expect(answer.items.map((i) => i.query)).toEqual(["potato dumplings, meat filled, boiled", "sour cream", "bacon, pan-fried"])
      expect(fake.requests[0]?.userText).toMatch(/in Lithuanian/)
      expect(fake.requests[0]?.userText).toMatch(/query stays in English/)
    }))

  describe("images", () => {
    it.scoped("a 2000×1500 photo reaches the model as 1024×768 JPEG", () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.enqueue(Reply.answer(meal))
        yield* (yield* vision(fake)).analyze(input(yield* photo(2000, 1500)))
        const sent = decodeDataUrl(fake.requests[0]?.imageUrls[0] ?? "")
        expect(sent.mime).toBe("image/jpeg")
        const meta = yield* Effect.promise(() => sharp(sent.bytes).metadata())
        expect([meta.format, meta.width, meta.height]).toEqual(["jpeg", 1024, 768])
      }))

    it.scoped("a small photo is not enlarged; a PNG goes as JPEG", () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.enqueue(Reply.answer(meal))
        yield* (yield* vision(fake)).analyze(input(yield* photo(300, 500, "png"), "en", "image/png"))
        const meta = yield* Effect.promise(() => sharp(decodeDataUrl(fake.requests[0]?.imageUrls[0] ?? "").bytes).metadata())
        expect([meta.format, meta.width, meta.height]).toEqual(["jpeg", 300, 500])
      }))

    it.scoped("a photo is turned upright per its EXIF orientation and its metadata is not sent", () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.enqueue(Reply.answer(meal))
        // Stored 1600×1200 landscape, EXIF orientation 6: the camera was held upright (portrait).
        const rotated = yield* Effect.promise(async () =>
          new Uint8Array(
            await sharp({ create: { width: 1600, height: 1200, channels: 3, background: { r: 9, g: 99, b: 199 } } })
              .jpeg()
              .withMetadata({ orientation: 6 })
              .toBuffer()
          )
        )
        yield* (yield* vision(fake)).analyze(input(rotated))
        const meta = yield* Effect.promise(() => sharp(decodeDataUrl(fake.requests[0]?.imageUrls[0] ?? "").bytes).metadata())
        expect([meta.width, meta.height, meta.orientation]).toEqual([768, 1024, undefined])
      }))

    it.scoped("an image whose pixels cannot be decoded goes to the model unchanged", () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.enqueue(Reply.answer(noFood))
        const good = yield* photo(800, 600)
        // A valid JPEG header followed by noise: the header check upstream passes, decoding does not.
        const broken = new Uint8Array([...good.subarray(0, 200), ...new Uint8Array(5000).fill(7)])
        yield* (yield* vision(fake)).analyze(input(broken))
        const sent = decodeDataUrl(fake.requests[0]?.imageUrls[0] ?? "")
        expect(sent.mime).toBe("image/jpeg")
        expect(new Uint8Array(sent.bytes)).toEqual(broken)
      }))
  })

  describe("answers that break the rules are invalid_answer", () => {
    const cases: ReadonlyArray<readonly [string, ReturnType<typeof Reply.content>]> = [
      ["text that is not JSON", Reply.content("Here is the analysis: chicken and rice.")],
      ["truncated JSON", Reply.content('{"food_detected": true, "dish_name": "Sou')],
      ["21 items", Reply.answer({ ...meal, items: Array.from({ length: 21 }, (_, i) => modelItem(`Item ${i}`, "rice, cooked", 10, [130, 3, 28, 0.3])) })],
      ["confidence 1.5", Reply.answer({ ...meal, items: [{ ...meal.items[0], confidence: 1.5 }] })],
      ["negative grams", Reply.answer({ ...meal, items: [{ ...meal.items[0], estimated_grams: -20 }] })],
      ["zero grams", Reply.answer({ ...meal, items: [{ ...meal.items[0], estimated_grams: 0 }] })],
      ["kcal over 900 per 100 g", Reply.answer({ ...meal, items: [modelItem("Butter", "butter", 10, [950, 1, 0, 81])] })],
      ["negative fat", Reply.answer({ ...meal, items: [modelItem("Rice", "rice, cooked", 100, [130, 3, 28, -1])] })],
      ["an empty name", Reply.answer({ ...meal, items: [modelItem("  ", "rice, cooked", 100, [130, 3, 28, 0.3])] })],
      ["an empty query", Reply.answer({ ...meal, items: [modelItem("Rice", "", 100, [130, 3, 28, 0.3])] })],
      ["food without items", Reply.answer({ ...meal, items: [] })],
      ["food without a dish name", Reply.answer({ ...meal, dish_name: "" })],
      ["food_detected as a string", Reply.answer({ ...meal, food_detected: "yes" })],
      ["a missing per_100g", Reply.answer({ ...meal, items: [{ name: "Rice", query: "rice", estimated_grams: 100, confidence: 0.5 }] })],
      ["an empty message", Reply.content(null)]
    ]
    for (const [name, reply] of cases) {
      it.scoped(name, () =>
        Effect.gen(function* () {
          const fake = yield* startFakeOpenAI()
          fake.enqueue(reply)
          const error = yield* failure((yield* vision(fake)).analyze(input(yield* photo(64, 64))))
          expect(error.reason).toBe("invalid_answer")
          expect(fake.requests).toHaveLength(1)
        }))
    }
  })

  it.scoped("an answer cut off by the token limit → cut_off, not the caller's invalid answer", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.enqueue(Reply.content('{"food_detected": true', { finishReason: "length" }))
      const error = yield* failure((yield* vision(fake)).analyze(input(yield* photo(64, 64))))
      expect(error.reason).toBe("cut_off")
      expect(error.message).toContain("output-token limit")
      expect(fake.requests).toHaveLength(1)
    }))

  describe("refusals", () => {
    it.scoped("message.refusal → refusal", () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.enqueue(Reply.refusal())
        const error = yield* failure((yield* vision(fake)).analyze(input(yield* photo(64, 64))))
        expect(error.reason).toBe("refusal")
        expect(fake.requests).toHaveLength(1)
      }))

    it.scoped("finish_reason content_filter → refusal", () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.enqueue(Reply.contentFilter())
        const error = yield* failure((yield* vision(fake)).analyze(input(yield* photo(64, 64))))
        expect(error.reason).toBe("refusal")
      }))
  })

  describe("provider errors", () => {
    it.scoped("500 → retried after a backoff sleep on the Clock", () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.enqueue(Reply.status(500), Reply.answer(meal))
        const model = yield* vision(fake)
        const { exit, delays } = yield* throughBackoff(model.analyze(input(yield* photo(64, 64))))
        expect(exit).toEqual(Exit.succeed(meal))
        expect(fake.requests).toHaveLength(2)
        expect(delays).toHaveLength(1)
        expect(delays[0]).toBeGreaterThanOrEqual(200)
        expect(delays[0]).toBeLessThanOrEqual(300)
      }))

    it.scoped("500, 429, a dropped connection, then success — three retries", () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.enqueue(Reply.status(500), Reply.status(429), Reply.drop(), Reply.answer(meal))
        const model = yield* vision(fake)
        const image = yield* photo(64, 64)
        const start = yield* TestClock.currentTimeMillis
        const { exit, delays } = yield* throughBackoff(
          model.analyze(input(image)).pipe(Effect.timeoutFail({ duration: "45 seconds", onTimeout: () => new CallerTimeout() })),
          [start + 45_000]
        )
        expect(exit).toEqual(Exit.succeed(meal))
        expect(fake.requests).toHaveLength(4)
        // Exponential: about 250, 500, 1000 ms (±20 % jitter).
        expect(delays).toHaveLength(3)
        delays.forEach((delay, i) => {
          expect(delay).toBeGreaterThanOrEqual(250 * 2 ** i * 0.8)
          expect(delay).toBeLessThanOrEqual(250 * 2 ** i * 1.2)
        })
      }))

    for (const failing of [Reply.status(502), Reply.status(429), Reply.drop()]) {
      const name = failing.kind === "status" ? `HTTP ${failing.status}` : "dropped connections"
      it.scoped(`${name} that never stop → provider_error after ${MAX_PROVIDER_RETRIES} retries and about 2 s, far inside the deadline`, () =>
        Effect.gen(function* () {
          const fake = yield* startFakeOpenAI()
          fake.setFallback(failing)
          const model = yield* vision(fake)
          const { exit, delays } = yield* throughBackoff(model.analyze(input(yield* photo(64, 64))))
          const error = yield* Effect.flip(exit)
          expect(error.reason).toBe("provider_error")
          if (failing.kind === "status") expect(error.message).toMatch(`HTTP ${failing.status}`)
          expect(fake.requests).toHaveLength(MAX_PROVIDER_RETRIES + 1)
          expect(delays).toHaveLength(MAX_PROVIDER_RETRIES)
          expect(delays.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1_750 * 1.2)
        }))
    }

    it.scoped("a short ANALYSIS_TIMEOUT_MS also bounds the retries", () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.setFallback(Reply.status(500))
        const model = yield* vision(fake, { ANALYSIS_TIMEOUT_MS: "1000" })
        const { exit, delays } = yield* throughBackoff(model.analyze(input(yield* photo(64, 64))))
        expect(Exit.isFailure(exit)).toBe(true)
        expect(delays.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1_000 + 1_200)
        expect(fake.requests.length).toBeLessThanOrEqual(4)
      }))

    for (const status of [400, 401, 403, 404, 422]) {
      it.scoped(`${status} → provider_error without a retry`, () =>
        Effect.gen(function* () {
          const fake = yield* startFakeOpenAI()
          fake.enqueue(Reply.status(status, { message: "Incorrect API key provided: sk-fake***key", code: "some_code" }), Reply.answer(meal))
          const error = yield* failure((yield* vision(fake)).analyze(input(yield* photo(64, 64))))
          expect(error.reason).toBe("provider_error")
          expect(error.message).toBe(`the vision model provider answered HTTP ${status} (some_code)`)
          expect(fake.requests).toHaveLength(1)
        }))
    }
  })

  it.scoped("a slow answer ends with the caller's timeout, and the request is aborted, not retried", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.enqueue(Reply.answer(meal, { delayMs: 10_000 }), Reply.answer(meal))
      const model = yield* vision(fake)
      const fiber = yield* model
        .analyze(input(yield* photo(64, 64)))
        .pipe(Effect.timeoutFail({ duration: "300 millis", onTimeout: () => new CallerTimeout() }), Effect.fork)
      yield* fake.awaitRequests(1)
      yield* TestClock.adjust("300 millis")
      const exit = yield* Fiber.await(fiber)
      expect(exit).toEqual(Exit.fail(new CallerTimeout()))
      yield* fake.waitUntil(() => fake.requests[0]?.settled === true)
      expect(fake.requests[0]?.aborted).toBe(true)
      expect(fake.requests).toHaveLength(1)
      expect(fake.queued()).toBe(1)
    }))

  it.scoped("concurrent calls each get their own answer; a paused fake holds them until resumed", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.pause()
      fake.enqueue(Reply.answer(meal), Reply.answer(noFood))
      const model = yield* vision(fake)
      const image = yield* photo(64, 64)
      const fiber = yield* Effect.all([model.analyze(input(image)), model.analyze(input(image))], { concurrency: 2 }).pipe(
        Effect.fork
      )
      yield* fake.awaitRequests(2)
      expect(fake.requests.some((r) => r.settled)).toBe(false)
      fake.resume()
      const answers = yield* Fiber.join(fiber)
      expect(answers.map((a) => a.food_detected).sort()).toEqual([false, true])
    }))

  it.scoped("no OPENAI_API_KEY → unavailable, and the provider is never called", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.enqueue(Reply.answer(meal))
      const model = yield* VisionModel.pipe(
        Effect.provide(VisionModelLive.pipe(Layer.provide(AppConfigFromEnv({ OPENAI_BASE_URL: fake.url })))),
        Effect.orDie
      )
      const error = yield* failure(model.analyze(input(yield* photo(64, 64))))
      expect(error.reason).toBe("unavailable")
      expect(fake.requests).toHaveLength(0)
    }))
})

describe("ModelAnswerSchema", () => {
  const decode = Schema.decodeUnknownEither(ModelAnswerSchema)

  it("accepts an answer with exactly the contract's fields and the bounds themselves", () => {
    const edge: ModelAnswer = {
      food_detected: true,
      dish_name: "x",
      items: Array.from({ length: 20 }, () => modelItem("a", "b", 0.001, [900, 100, 0, 100], 1))
    }
    expect(decode(edge)._tag).toBe("Right")
    expect(decode({ ...edge, items: edge.items.map((i) => ({ ...i, confidence: 0 })) })._tag).toBe("Right")
  })

  it("accepts 'no food' with or without a dish name", () => {
    expect(decode(noFood)._tag).toBe("Right")
    expect(decode({ ...noFood, dish_name: "Empty plate" })._tag).toBe("Right")
  })

  it("rejects a macronutrient above 100 g per 100 g", () => {
    expect(decode({ ...meal, items: [modelItem("Oil", "oil", 10, [884, 0, 0, 101])] })._tag).toBe("Left")
  })
})
