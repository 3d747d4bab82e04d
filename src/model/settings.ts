/** The settings of the vision model call an operator tunes: reasoning effort, image detail, output cap, and the provider's prices. */
import { Config, ConfigError, Either, Option } from "effect"

export const REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"] as const
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number]
export const IMAGE_DETAILS = ["low", "high", "auto"] as const
export type ImageDetail = (typeof IMAGE_DETAILS)[number]

/** Prices in USD per million tokens, as providers publish them. */
export interface ModelPrices {
  readonly inputPerMTok: number
  /** Prompt tokens the provider served from its cache; the input price when not set. */
  readonly cachedInputPerMTok: number
  readonly outputPerMTok: number
}

export interface ModelCallSettings {
  /** None = the parameter is not sent and the model uses its own default. */
  readonly reasoningEffort: Option.Option<ReasoningEffort>
  readonly imageDetail: ImageDetail
  /** `max_completion_tokens`: reasoning and answer together. */
  readonly maxOutputTokens: number
  /** None = no prices set: tokens are counted, costs are not. */
  readonly prices: Option.Option<ModelPrices>
}

/** Low: OpenAI's advice for routine work that needs a little thought (see docs/vision-model.md). */
export const DEFAULT_REASONING_EFFORT: ReasoningEffort = "low"
export const DEFAULT_IMAGE_DETAIL: ImageDetail = "auto"
/** At gpt-5-mini's 2 USD per million output tokens, 4,000 tokens cost 0.008 USD: below the 0.01 USD an analysis earns. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4000

const invalid = (name: string, message: string) => ConfigError.InvalidData([name], message)

const reasoningEffort = Config.string("VISION_REASONING_EFFORT").pipe(
  Config.mapOrFail((raw) => {
    const value = raw.trim().toLowerCase()
    if (value === "default") return Either.right(Option.none<ReasoningEffort>())
    const effort = REASONING_EFFORTS.find((e) => e === value)
    return effort === undefined
      ? Either.left(invalid("VISION_REASONING_EFFORT", `VISION_REASONING_EFFORT must be one of ${REASONING_EFFORTS.join(", ")} or default (not sent), not "${raw}"`))
      : Either.right(Option.some(effort))
  }),
  Config.withDefault(Option.some(DEFAULT_REASONING_EFFORT))
)

const imageDetail = Config.string("VISION_IMAGE_DETAIL").pipe(
  Config.mapOrFail((raw) => {
    const detail = IMAGE_DETAILS.find((d) => d === raw.trim().toLowerCase())
    return detail === undefined
      ? Either.left(invalid("VISION_IMAGE_DETAIL", `VISION_IMAGE_DETAIL must be low, high or auto, not "${raw}"`))
      : Either.right(detail)
  }),
  Config.withDefault(DEFAULT_IMAGE_DETAIL)
)

const maxOutputTokens = Config.integer("VISION_MAX_OUTPUT_TOKENS").pipe(
  Config.validate({
    message: "VISION_MAX_OUTPUT_TOKENS must be a whole number of tokens from 256 to 128000",
    validation: (n) => n >= 256 && n <= 128_000
  }),
  Config.withDefault(DEFAULT_MAX_OUTPUT_TOKENS)
)

const price = (name: string) =>
  Config.number(name).pipe(
    Config.validate({ message: `${name} must be a price in USD per million tokens, 0 or more (e.g. 0.25)`, validation: (n) => Number.isFinite(n) && n >= 0 })
  )

const prices = Config.all({
  input: Config.option(price("MODEL_PRICE_INPUT_PER_MTOK")),
  cached: Config.option(price("MODEL_PRICE_CACHED_INPUT_PER_MTOK")),
  output: Config.option(price("MODEL_PRICE_OUTPUT_PER_MTOK"))
}).pipe(
  Config.mapOrFail(({ cached, input, output }) => {
    if (Option.isNone(input) && Option.isNone(output)) {
      return Option.isSome(cached)
        ? Either.left(invalid("MODEL_PRICE_INPUT_PER_MTOK", "MODEL_PRICE_CACHED_INPUT_PER_MTOK needs MODEL_PRICE_INPUT_PER_MTOK and MODEL_PRICE_OUTPUT_PER_MTOK"))
        : Either.right(Option.none<ModelPrices>())
    }
    if (Option.isNone(input) || Option.isNone(output)) {
      const missing = Option.isNone(input) ? "MODEL_PRICE_INPUT_PER_MTOK" : "MODEL_PRICE_OUTPUT_PER_MTOK"
      return Either.left(invalid(missing, `${missing} is needed with the other price: set MODEL_PRICE_INPUT_PER_MTOK and MODEL_PRICE_OUTPUT_PER_MTOK together`))
    }
    return Either.right(
      Option.some({ inputPerMTok: input.value, cachedInputPerMTok: Option.getOrElse(cached, () => input.value), outputPerMTok: output.value })
    )
  })
)

/** Every setting of the model call, validated: a bad value stops the start naming the variable. */
export const modelCallSettings: Config.Config<ModelCallSettings> = Config.all({
  reasoningEffort,
  imageDetail,
  maxOutputTokens,
  prices
})

/** The settings when none is given (tests and tools that build settings by hand). */
export const DEFAULT_MODEL_CALL_SETTINGS: ModelCallSettings = {
  reasoningEffort: Option.some(DEFAULT_REASONING_EFFORT),
  imageDetail: DEFAULT_IMAGE_DETAIL,
  maxOutputTokens: DEFAULT_MAX_OUTPUT_TOKENS,
  prices: Option.none()
}

/** The settings in one line, for the banner and `morsel model check`. */
export const describeModelCall = (settings: ModelCallSettings): string => {
  const effort = Option.match(settings.reasoningEffort, { onNone: () => "model's default", onSome: (e) => e })
  const cost = Option.match(settings.prices, {
    onNone: () => "no prices set (tokens counted, no cost)",
    onSome: (p) => `prices ${p.inputPerMTok}/${p.cachedInputPerMTok}/${p.outputPerMTok} USD per M input/cached/output tokens`
  })
  return `reasoning effort ${effort}, image detail ${settings.imageDetail}, at most ${settings.maxOutputTokens} output tokens, ${cost}`
}
