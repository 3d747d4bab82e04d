/** The seam to the vision model: one image in, the model's structured reading of the meal out. */
import { Context, Data, type Effect, Schema } from "effect"
import type { ImageMime } from "../domain/image.ts"
import type { Nutrition } from "../domain/schemas.ts"
import type { ModelCall } from "../model/usage.ts"

export interface ModelItem {
  readonly name: string
  readonly query: string
  readonly estimated_grams: number
  readonly confidence: number
  readonly per_100g: Nutrition
}

export interface ModelAnswer {
  readonly food_detected: boolean
  readonly dish_name: string
  readonly items: ReadonlyArray<ModelItem>
}

/** The photo as the model receives it (downscaled and re-encoded by a model over the network). */
export interface ModelPhoto {
  readonly bytes: Uint8Array
  readonly mime: string
}

export interface VisionInput {
  readonly image: Uint8Array
  readonly mime: ImageMime
  readonly language: "en" | "lt"
  /** The photo as `prepare` makes it, when its preparation was begun before the call; made by the call otherwise. */
  readonly photo?: Effect.Effect<ModelPhoto> | undefined
  /**
   * Told what the call used and how it was asked for, whenever an answer came back, usable or not (its tokens are
   * paid for all the same). Only a model over the network tells.
   */
  readonly onCall?: ((call: ModelCall) => Effect.Effect<void>) | undefined
}

/** Text the model wrote: surrounding whitespace dropped, then at least one character left. */
const Text = Schema.Trim.pipe(Schema.minLength(1, { message: () => "must not be empty" }))

const Finite = Schema.Number.pipe(Schema.finite())

/** A macronutrient can never exceed the 100 g it is part of. */
const GramsPer100 = Finite.pipe(Schema.between(0, 100))

/**
 * The rules a model answer must meet before anything else sees it (the documented vision model answer).
 * Fields beyond the contract's are ignored, so any OpenAI-compatible server's extra output is harmless.
 */
export const ModelItemSchema = Schema.Struct({
  name: Text,
  query: Text,
  estimated_grams: Finite.pipe(Schema.positive()),
  confidence: Finite.pipe(Schema.between(0, 1)),
  per_100g: Schema.Struct({
    kcal: Finite.pipe(Schema.between(0, 900)),
    protein_g: GramsPer100,
    carbs_g: GramsPer100,
    fat_g: GramsPer100
  })
})

export const MAX_MODEL_ITEMS = 20

export const ModelAnswerSchema = Schema.Struct({
  food_detected: Schema.Boolean,
  // Empty is allowed only for "no food"; the filter below requires a name when food is detected.
  dish_name: Schema.Trim,
  items: Schema.Array(ModelItemSchema).pipe(Schema.maxItems(MAX_MODEL_ITEMS))
}).pipe(
  Schema.filter((answer) =>
    !answer.food_detected
      ? undefined
      : answer.items.length === 0
        ? "food_detected is true but items is empty"
        : answer.dish_name.length === 0
          ? "food_detected is true but dish_name is empty"
          : undefined
  )
)

/**
 * The model could not give a usable answer. Only `invalid_answer` (an answer that broke the rules) is the
 * caller's failure for failure_limit; the rest are the provider's or ours — `cut_off` too, an answer stopped by
 * the output-token cap (the operator's VISION_MAX_OUTPUT_TOKENS, or the model's own).
 */
export class VisionFailure extends Data.TaggedError("VisionFailure")<{
  readonly reason: "unavailable" | "refusal" | "provider_error" | "invalid_answer" | "cut_off"
  readonly message: string
}> {}

/** Whether a vision failure counts toward the payer's failure_limit: provider errors, refusals and cut-off answers never do. */
export const countsTowardFailureLimit = (failure: VisionFailure): boolean => failure.reason === "invalid_answer"

export class VisionModel extends Context.Tag("morsel/VisionModel")<
  VisionModel,
  {
    /** Reported in each result's `model`. */
    readonly model: string
    readonly analyze: (input: VisionInput) => Effect.Effect<ModelAnswer, VisionFailure>
    /** The photo as this model receives it, for a caller to begin it early (`VisionInput.photo`); a model without it takes the photo as it is. */
    readonly prepare?: (input: Pick<VisionInput, "image" | "mime">) => Effect.Effect<ModelPhoto>
  }
>() {}
