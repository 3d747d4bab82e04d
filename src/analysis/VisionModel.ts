/** The seam to the vision model: one image in, the model's structured reading of the meal out. */
import { Context, Data, type Effect } from "effect"
import type { ImageMime } from "../domain/image.ts"
import type { Nutrition } from "../domain/schemas.ts"

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

export interface VisionInput {
  readonly image: Uint8Array
  readonly mime: ImageMime
  readonly language: "en" | "lt"
}

/** The model could not give a usable answer. `refusal` failures do not count towards failure_limit. */
export class VisionFailure extends Data.TaggedError("VisionFailure")<{
  readonly reason: "unavailable" | "refusal" | "provider_error" | "invalid_answer"
  readonly message: string
}> {}

export class VisionModel extends Context.Tag("morsel/VisionModel")<
  VisionModel,
  {
    /** Reported in each result's `model`. */
    readonly model: string
    readonly analyze: (input: VisionInput) => Effect.Effect<ModelAnswer, VisionFailure>
  }
>() {}
