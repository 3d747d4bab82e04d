// What the live model learns from a model server's 400: only a refusal that names a parameter drops it (or steps the
// structured output down) for the rest of the process; an unrelated 400 that merely mentions a word fails that
// analysis alone and every later request still carries the output-token cap, the reasoning effort and the image detail.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { AppConfigFromEnv } from "../../src/config.ts"
import { type RecordedRequest, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"

const photo = await makeImage(320, 240, "jpeg")
const SETTINGS = { VISION_MAX_OUTPUT_TOKENS: "2000", VISION_REASONING_EFFORT: "low", VISION_IMAGE_DETAIL: "high" }

/** The optional parameters one request carried, as the server received them. */
const carried = (request: RecordedRequest | undefined) => {
  const body = (request?.body ?? {}) as Record<string, unknown>
  const messages = body["messages"] as ReadonlyArray<{ readonly content: ReadonlyArray<Record<string, unknown>> }>
  const image = messages[0]?.content.find((part) => part["type"] === "image_url")?.["image_url"] as Record<string, unknown> | undefined
  return {
    max_completion_tokens: body["max_completion_tokens"],
    reasoning_effort: body["reasoning_effort"],
    detail: image?.["detail"],
    output: (body["response_format"] as { readonly type?: string } | undefined)?.type
  }
}

/** One analysis of the photo by the live model with every optional setting, against the fake at `url`. */
const analysis = (url: string) =>
  Effect.map(
    VisionModel.pipe(
      Effect.provide(VisionModelLive.pipe(Layer.provide(AppConfigFromEnv({ OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: url, ...SETTINGS })))),
      Effect.orDie
    ),
    (model) => model.analyze({ image: new Uint8Array(Buffer.from(photo.base64, "base64")), mime: "image/jpeg", language: "en" })
  )

const ALL_SENT = { max_completion_tokens: 2000, reasoning_effort: "low", detail: "high", output: "json_schema" }

/** A 400 of the kind a server answers for reasons of its own, with no `param`. */
const unrelated: ReadonlyArray<readonly [string, string]> = [
  [
    "vLLM's context-length refusal naming max_completion_tokens",
    "'max_completion_tokens' or 'max_tokens' is too large: 2000. This model's maximum context length is 2048 tokens and your request has 1200 input tokens (2000 > 2048 - 1200)."
  ],
  ["a proxy's error that mentions a detail", "litellm.BadRequestError: Error code: 400 - {'detail': 'messages: too many images in one request'}"],
  ["a context-length error that mentions reasoning", "This model's maximum context length is 8192 tokens, reasoning included; your messages resulted in 9000 tokens."],
  ["a chat-template error that mentions grammar", "Error rendering the chat template: unexpected token in the template grammar at line 3"]
]

describe("an unrelated 400 from the model server", () => {
  for (const [name, message] of unrelated) {
    it.scopedLive(`${name}: that analysis fails, and the next request still sends every setting`, () =>
      Effect.gen(function* () {
        const fake = yield* startFakeOpenAI()
        fake.enqueue(Reply.status(400, { message }))
        fake.setFallback(Reply.answer(chickenRice))
        const analyze = yield* analysis(fake.url)
        const failure = yield* Effect.flip(analyze)
        expect(failure).toMatchObject({ reason: "provider_error" })
        expect(yield* analyze).toEqual(chickenRice)
        expect(fake.requests.map(carried)).toEqual([ALL_SENT, ALL_SENT])
      }), 60_000)
  }

  it.scopedLive("a message naming the parameter whole as not taken, without `param`, still drops the output cap", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.enqueue(Reply.status(400, { message: "Unrecognized request argument supplied: max_completion_tokens" }))
      fake.setFallback(Reply.answer(chickenRice))
      const analyze = yield* analysis(fake.url)
      expect(yield* analyze).toEqual(chickenRice)
      expect(fake.requests.map(carried)).toEqual([ALL_SENT, { ...ALL_SENT, max_completion_tokens: undefined }])
    }), 60_000)

  it.scopedLive("a refusal naming the parameter (OpenAI's `param`) still drops just that one, once", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.refuseParameter("reasoning_effort")
      fake.setFallback(Reply.answer(chickenRice))
      const analyze = yield* analysis(fake.url)
      expect(yield* analyze).toEqual(chickenRice)
      expect(yield* analyze).toEqual(chickenRice)
      const withoutEffort = { ...ALL_SENT, reasoning_effort: undefined }
      expect(fake.requests.map(carried)).toEqual([ALL_SENT, withoutEffort, withoutEffort])
    }), 60_000)
})
