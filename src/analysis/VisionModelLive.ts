/** The vision model over any OpenAI-compatible Chat Completions server: downscale, ask for strict JSON, validate, retry transient failures. */
import { Clock, Data, Duration, Effect, Layer, Option, ParseResult, Redacted, Schedule, Schema } from "effect"
import OpenAI from "openai"
import type { ChatCompletion, ChatCompletionCreateParamsNonStreaming } from "openai/resources/chat/completions"
import { AppConfig } from "../config.ts"
import { type DroppableParameter, refusedParameter, refusesStructuredOutput, serverWords } from "../model/refusals.ts"
import type { ModelCallSettings } from "../model/settings.ts"
import { modelCallOf, type OutputMode, recordMetrics, tokensOf } from "../model/usage.ts"
import { type ModelAnswer, ModelAnswerSchema, type ModelPhoto, type VisionInput, VisionFailure, VisionModel } from "./VisionModel.ts"

/**
 * sharp and libvips, loaded with the first photo: about 20 MiB that a server waiting for work does not hold.
 * Each photo is decoded once and never again: libvips' operation cache only holds memory, and one worker thread
 * per image keeps the peak of a few concurrent photos low (the service runs a handful of analyses at once).
 */
let imageLibrary: Promise<(typeof import("sharp"))["default"]> | undefined
const loadSharp = () => {
  imageLibrary ??= import("sharp").then(({ default: sharp }) => {
    sharp.cache(false)
    sharp.concurrency(1)
    return sharp
  })
  return imageLibrary
}

/**
 * Photos are downscaled one at a time: each holds about 9 MiB of libvips memory for some 35 ms, while the model
 * that follows takes seconds, so concurrent analyses wait a few milliseconds here rather than hold that memory at once.
 */
const pixelWork = Effect.unsafeMakeSemaphore(1)

/** Longest image side the model receives; larger photos cost more tokens and time without better estimates. */
export const MAX_MODEL_IMAGE_SIDE = 1024
const JPEG_QUALITY = 85
const OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

const LANGUAGE_NAME: Record<VisionInput["language"], string> = {
  en: "English",
  lt: "Lithuanian (lietuvių kalba)"
}

/** The instruction sent with every photo; kept here, whole, so it can be read and reviewed as one text. */
export const visionInstruction = (language: VisionInput["language"]): string => {
  const lang = LANGUAGE_NAME[language]
  return `You estimate the nutrition of a meal from one photo for a food-logging app. Answer only with JSON that follows the response schema.

Is there food?
- Set food_detected to true only if the photo shows food or drink that someone is about to eat or drink.
- Otherwise (no food, only packaging or a menu, an empty plate, a drawing or screen of food) set food_detected to false, dish_name to "" and items to [].

Components (items):
- List each distinct visible component as its own item, for example rice, grilled chicken, salad leaves, dressing. At most 20 items.
- Merge a component that appears in several places into one item. Do not list anything that is not eaten.
- Fat is what is most often misjudged. List visible cooking oil, butter, mayonnaise, dressings, sauces and gravies as their own items with their own grams, even a thin layer, a drizzle or a pool on the plate. Oil absorbed by fried food belongs in that food's per_100g values.

Grams (estimated_grams):
- The edible weight of the component as served in the photo, in grams, greater than 0.
- Exclude the plate, bowl, glass, cup, packaging, bones, shells, pits, peel, rind and anything else not eaten.
- Judge size from what the photo shows: plate and cutlery size, hands, cans, the depth of bowls.

Nutrition (per_100g):
- Your estimate for 100 g of the edible component as prepared (cooked, fried, dressed): kcal, protein_g, carbs_g, fat_g.
- kcal is between 0 and 900; each gram value is between 0 and 100.

Food-database query (query):
- A short English search text for the component as prepared, in the style of USDA FoodData Central descriptions: the food first, then form and preparation, e.g. "rice, white, long-grain, cooked", "chicken breast, roasted", "oil, olive".
- query is always in English, whatever the answer language.

Confidence (confidence):
- A number from 0 to 1: how sure you are of both what the component is and its grams. Lower it for hidden, mixed or ambiguous components.

Language:
- Write dish_name (a short name for the whole meal) and every item name in ${lang}.
- Only query stays in English.`
}

const number = (description: string) => ({ type: "number", description }) as const

/**
 * The strict structured-output schema the model must fill: exactly the documented answer fields. Bounds are stated
 * in descriptions, not keywords, because not every OpenAI-compatible server accepts minimum/maxItems in
 * strict mode; ModelAnswerSchema enforces them.
 */
export const ANSWER_JSON_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["food_detected", "dish_name", "items"],
  properties: {
    food_detected: { type: "boolean", description: "true only if the photo shows food or drink to be consumed" },
    dish_name: { type: "string", description: "short name of the whole meal in the requested language; empty when no food" },
    items: {
      type: "array",
      description: "distinct visible edible components, at most 20; empty when no food",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["name", "query", "estimated_grams", "confidence", "per_100g"],
        properties: {
          name: { type: "string", description: "component name in the requested language" },
          query: { type: "string", description: "English food-database search text" },
          estimated_grams: number("edible grams in the photo, > 0"),
          confidence: number("0 to 1"),
          per_100g: {
            type: "object",
            additionalProperties: false,
            required: ["kcal", "protein_g", "carbs_g", "fat_g"],
            properties: {
              kcal: number("kcal per 100 g, 0 to 900"),
              protein_g: number("grams per 100 g, 0 to 100"),
              carbs_g: number("grams per 100 g, 0 to 100"),
              fat_g: number("grams per 100 g, 0 to 100")
            }
          }
        }
      }
    }
  }
} as const

export const ANSWER_SCHEMA_NAME = "meal_estimate"

/**
 * The photo as the model gets it: turned upright per EXIF, at most 1024 px on the longest side (never
 * enlarged), re-encoded as JPEG — which also strips metadata such as GPS. PNG transparency becomes white.
 * If the pixels cannot be decoded, the original (already checked: PNG/JPEG, ≤ 2048 px) goes as it is.
 */
export const prepareImage = (input: Pick<VisionInput, "image" | "mime">): Effect.Effect<ModelPhoto> =>
  Effect.tryPromise(async () =>
    (await loadSharp())(input.image, { failOn: "none" })
      .autoOrient()
      .resize({ width: MAX_MODEL_IMAGE_SIDE, height: MAX_MODEL_IMAGE_SIDE, fit: "inside", withoutEnlargement: true })
      .flatten({ background: "#ffffff" })
      .jpeg({ quality: JPEG_QUALITY })
      .toBuffer()
  ).pipe(
    pixelWork.withPermits(1),
    Effect.map((bytes): ModelPhoto => ({ bytes, mime: "image/jpeg" })),
    Effect.catchAll(() =>
      Effect.logWarning("could not re-encode the photo for the model; sending it unchanged").pipe(
        Effect.as({ bytes: input.image, mime: input.mime })
      )
    )
  )

/** A failure worth another attempt: 408, 429, 5xx, connection trouble. */
class TransientFailure extends Data.TaggedError("TransientFailure")<{ readonly message: string }> {}

const describeApiError = (error: InstanceType<typeof OpenAI.APIError>): string => {
  // The provider's free-text message can echo part of the key (401), so only its code travels on.
  const code = typeof error.code === "string" ? ` (${error.code})` : ""
  return `the vision model provider answered HTTP ${error.status}${code}`
}

const classify = (error: unknown): TransientFailure | VisionFailure => {
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return new TransientFailure({ message: "the vision model provider did not answer in time" })
  }
  if (error instanceof OpenAI.APIConnectionError || error instanceof OpenAI.APIUserAbortError) {
    return new TransientFailure({ message: "could not reach the vision model provider" })
  }
  if (error instanceof OpenAI.APIError && typeof error.status === "number") {
    const { status } = error
    return status === 408 || status === 429 || status >= 500
      ? new TransientFailure({ message: describeApiError(error) })
      : new VisionFailure({ reason: "provider_error", message: describeApiError(error) })
  }
  return new VisionFailure({ reason: "provider_error", message: "the vision model call failed unexpectedly" })
}

/** Retries after a transient provider failure: few and short, so a failing provider is a prompt 502, not a 504. */
export const MAX_PROVIDER_RETRIES = 3

/**
 * Backoff between attempts: 250 ms doubling (250, 500, 1000 ms), ±20 % jitter, at most MAX_PROVIDER_RETRIES
 * retries (about 1.75 s in all) and never past the analysis timeout. The caller's own deadline interrupts it
 * sooner (the HTTP call is aborted).
 */
export const retrySchedule = (budget: Duration.DurationInput) =>
  Schedule.exponential("250 millis").pipe(
    Schedule.jittered,
    Schedule.upTo(budget),
    Schedule.intersect(Schedule.recurs(MAX_PROVIDER_RETRIES))
  )

const decodeAnswer = Schema.decodeUnknown(Schema.parseJson(ModelAnswerSchema))

/** Some compatible servers wrap JSON in a Markdown fence even in JSON mode. */
const unfence = (text: string): string => {
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n\s*```\s*$/.exec(text)
  return fenced?.[1] ?? text
}

const invalidAnswer = (message: string) => new VisionFailure({ reason: "invalid_answer", message })

const clip = (text: string, max = 300) => (text.length > max ? `${text.slice(0, max)}…` : text)

/** Turns one completion into a validated answer, a refusal, or an invalid-answer failure. */
export const readCompletion = (completion: ChatCompletion): Effect.Effect<ModelAnswer, VisionFailure> => {
  const choice = Array.isArray(completion.choices) ? completion.choices[0] : undefined
  if (choice === undefined) return Effect.fail(invalidAnswer("the model answer held no choices"))
  const message = choice.message
  if (typeof message?.refusal === "string" && message.refusal.length > 0) {
    return Effect.fail(new VisionFailure({ reason: "refusal", message: "the vision model declined to analyse this image" }))
  }
  if (choice.finish_reason === "content_filter") {
    return Effect.fail(new VisionFailure({ reason: "refusal", message: "the vision model provider's content filter stopped the answer" }))
  }
  // The output-token cap is the server's setting, not the caller's doing: never counted against the payer.
  if (choice.finish_reason === "length") {
    return Effect.fail(new VisionFailure({ reason: "cut_off", message: "the model answer was cut off by the server's output-token limit before it was complete" }))
  }
  const content = message?.content
  if (typeof content !== "string" || content.trim().length === 0) return Effect.fail(invalidAnswer("the model answer was empty"))
  return decodeAnswer(unfence(content)).pipe(
    Effect.mapError((error) => {
      // The first broken rule, by its place in the answer; the schema itself stays internal.
      const first = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
      const where = first && first.path.length > 0 ? ` at ${first.path.join(".")}` : ""
      return invalidAnswer(`the model answer broke the answer rules${where}: ${clip(first?.message ?? "not valid JSON")}`)
    })
  )
}

/** The schema as JSON mode needs it: in the instruction, since the request can no longer carry it. */
const schemaInstruction = (language: VisionInput["language"]): string =>
  `${visionInstruction(language)}

The answer is one JSON object, nothing else, that follows this JSON schema:
${JSON.stringify(ANSWER_JSON_SCHEMA)}`

/** The model was asked for something this server refuses; the request is sent again without it. */
class Adapted extends Data.TaggedError("Adapted")<{ readonly message: string; readonly announce: boolean }> {}

/**
 * What this process learned of the server: the structured output it takes and the optional parameters it refused.
 * Each is learned once, said once in the log, and kept until the process ends.
 */
interface ServerTraits {
  output: OutputMode
  readonly refused: Set<DroppableParameter>
}

/** The parameter's setting, for the line that says it was dropped. */
const SETTING_OF: Record<DroppableParameter, string> = {
  reasoning_effort: "VISION_REASONING_EFFORT",
  max_completion_tokens: "VISION_MAX_OUTPUT_TOKENS",
  detail: "VISION_IMAGE_DETAIL"
}

/** One request as the server's traits allow it, and the optional parameters it carries. */
export const requestOf = (
  model: string,
  call: ModelCallSettings,
  traits: { readonly output: OutputMode; readonly refused: ReadonlySet<DroppableParameter> },
  language: VisionInput["language"],
  image: { readonly bytes: Uint8Array; readonly mime: string }
): { readonly params: ChatCompletionCreateParamsNonStreaming; readonly sent: ReadonlyArray<DroppableParameter> } => {
  const sends = (name: DroppableParameter) => !traits.refused.has(name)
  const effort = sends("reasoning_effort") ? Option.getOrUndefined(call.reasoningEffort) : undefined
  const sent: Array<DroppableParameter> = []
  if (effort !== undefined) sent.push("reasoning_effort")
  if (sends("max_completion_tokens")) sent.push("max_completion_tokens")
  if (sends("detail")) sent.push("detail")
  const url = `data:${image.mime};base64,${Buffer.from(image.bytes).toString("base64")}`
  const params: ChatCompletionCreateParamsNonStreaming = {
    model,
    messages: [
      {
        role: "user",
        content: [
          { type: "text", text: traits.output === "json_schema" ? visionInstruction(language) : schemaInstruction(language) },
          { type: "image_url", image_url: sends("detail") ? { url, detail: call.imageDetail } : { url } }
        ]
      }
    ],
    ...(traits.output === "json_schema"
      ? { response_format: { type: "json_schema", json_schema: { name: ANSWER_SCHEMA_NAME, strict: true, schema: ANSWER_JSON_SCHEMA } } }
      : traits.output === "json_object"
        ? { response_format: { type: "json_object" } }
        : {}),
    ...(effort === undefined ? {} : { reasoning_effort: effort }),
    ...(sends("max_completion_tokens") ? { max_completion_tokens: call.maxOutputTokens } : {})
  }
  return { params, sent }
}

/** The next way to ask after a refusal of `output`: JSON mode, then plain text. */
const NEXT_OUTPUT: Record<OutputMode, OutputMode | undefined> = { json_schema: "json_object", json_object: "text", text: undefined }

const OUTPUT_WORDS: Record<OutputMode, string> = {
  json_schema: "strict structured output (json_schema)",
  json_object: "JSON mode (json_object) with the schema in the instruction",
  text: "plain text with the schema in the instruction"
}

/**
 * Learns from a refusal: the structured output steps down once (json_schema → json_object → none) and a refused
 * optional parameter is no longer sent. Another request may have learned it first; then it is only sent again.
 */
const learn = (
  traits: ServerTraits,
  error: unknown,
  asked: { readonly output: OutputMode; readonly sent: ReadonlyArray<DroppableParameter> }
): Adapted | undefined => {
  const parameter = refusedParameter(error, asked.sent)
  if (parameter !== undefined) {
    const announce = !traits.refused.has(parameter)
    traits.refused.add(parameter)
    return new Adapted({
      announce,
      message: `the vision model server refused ${parameter} (${serverWords(error)}); ${SETTING_OF[parameter]} is no longer sent, so the model uses its own default`
    })
  }
  const next = NEXT_OUTPUT[asked.output]
  if (next === undefined || !refusesStructuredOutput(error)) return undefined
  const announce = traits.output === asked.output
  if (announce) traits.output = next
  return new Adapted({
    announce,
    message: `the vision model server refused ${OUTPUT_WORDS[asked.output]} (${serverWords(error)}); asking with ${OUTPUT_WORDS[traits.output]} from now on, answers checked as before`
  })
}

/** At most one step per way of asking and per optional parameter. */
const MAX_ADAPTATIONS = 5

export const VisionModelLive: Layer.Layer<VisionModel, never, AppConfig> = Layer.effect(
  VisionModel,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { model, call: callSettings } = config.openai
    const budget = Duration.millis(config.analysisTimeoutMs)
    const traits: ServerTraits = { output: "json_schema", refused: new Set() }

    const client = Option.map(
      config.openai.apiKey,
      (key) =>
        new OpenAI({
          apiKey: Redacted.value(key),
          baseURL: Option.getOrElse(config.openai.baseUrl, () => OPENAI_DEFAULT_BASE_URL),
          // Retries are ours (Effect's Clock, interruptible); the SDK's timeout only backs up the caller's deadline.
          maxRetries: 0,
          timeout: config.analysisTimeoutMs + 5_000
        })
    )

    /** One request as the server's traits now allow; a refusal it can do without is learned and answered by `Adapted`. */
    const ask = (openai: OpenAI, language: VisionInput["language"], image: { bytes: Uint8Array; mime: string }) =>
      Effect.suspend(() => {
        const output = traits.output
        const { params, sent } = requestOf(model, callSettings, traits, language, image)
        return Effect.tryPromise({
          try: (signal) => openai.chat.completions.create(params, { signal }),
          catch: (error) => learn(traits, error, { output, sent }) ?? classify(error)
        }).pipe(Effect.map((completion) => ({ completion, output })))
      }).pipe(
        Effect.tapErrorTag("Adapted", (e) => (e.announce ? Effect.logWarning(e.message) : Effect.void)),
        Effect.retry({ while: (e) => e._tag === "Adapted", times: MAX_ADAPTATIONS }),
        Effect.catchTag("Adapted", (e) => Effect.fail(new VisionFailure({ reason: "provider_error", message: e.message })))
      )

    const analyze = (input: VisionInput): Effect.Effect<ModelAnswer, VisionFailure> =>
      Option.match(client, {
        onNone: () =>
          Effect.fail(new VisionFailure({ reason: "unavailable", message: "no vision model is configured (OPENAI_API_KEY is unset)" })),
        onSome: (openai) =>
          Effect.gen(function* () {
            const image = yield* (input.photo ?? prepareImage(input))
            // Milliseconds of the Clock, not Effect.timed: a jittered backoff leaves the test clock between nanoseconds.
            const started = yield* Clock.currentTimeMillis
            const { completion, output } = yield* ask(openai, input.language, image).pipe(
              Effect.tapErrorTag("TransientFailure", (e) =>
                Effect.logWarning("vision model call failed; retrying a few times").pipe(Effect.annotateLogs("reason", e.message))
              ),
              Effect.retry({ schedule: retrySchedule(budget), while: (e) => e._tag === "TransientFailure" }),
              Effect.catchTag("TransientFailure", (e) => Effect.fail(new VisionFailure({ reason: "provider_error", message: e.message })))
            )
            const seconds = Math.max(0, ((yield* Clock.currentTimeMillis) - started) / 1000)
            const call = modelCallOf(tokensOf(completion.usage), seconds, output, callSettings.prices, [...traits.refused])
            yield* recordMetrics(call)
            if (input.onCall !== undefined) yield* input.onCall(call)
            return yield* readCompletion(completion)
          }).pipe(Effect.withSpan("VisionModel.analyze", { attributes: { model, language: input.language } }))
      })

    // Without a model to ask there is no photo to make ready: the call answers unavailable first.
    return VisionModel.of({ model, analyze, ...(Option.isSome(client) ? { prepare: prepareImage } : {}) })
  })
)
