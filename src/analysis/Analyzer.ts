/** The nutrition pipeline: vision model, food-database matching, portions and the assembled result. */
import { Clock, Context, Data, Duration, Effect, Layer, Option } from "effect"
import { AppConfig } from "../config.ts"
import type { ImageMime } from "../domain/image.ts"
import { AnalysisFailed, AnalysisTimeout, NoFoodDetected, ServiceUnavailable } from "../domain/errors.ts"
import type { RequestId } from "../domain/ids.ts"
import type { AnalysisResult, ResultItem } from "../domain/schemas.ts"
import { FoodDb } from "../foods/core/FoodDb.ts"
import type { ModelCall } from "../model/usage.ts"
import { countsTowardFailureLimit, type ModelPhoto, VisionModel } from "./VisionModel.ts"
import { allocateGrams, nutritionFor, roundGrams, roundNutrition, sumGrams, sumNutrition } from "../foods/core/arithmetic.ts"

export interface AnalysisInput {
  readonly requestId: RequestId
  readonly image: Uint8Array
  readonly mime: ImageMime
  readonly language: "en" | "lt"
  readonly knownTotalGrams: number | undefined
  /** The photo as the model receives it, begun earlier with `prepare`; made by the model call otherwise. */
  readonly photo?: Effect.Effect<ModelPhoto> | undefined
  /** Told what the model call used, whenever one came back (a usable answer or not). */
  readonly onModelCall?: ((call: ModelCall) => Effect.Effect<void>) | undefined
}

/**
 * Why an analysis produced no result; `countsAsFailure` feeds the failure_limit. Only no food and answers that
 * break the rules count: provider errors, refusals, timeouts and our own outages never do.
 */
export class AnalysisRejected extends Data.TaggedError("AnalysisRejected")<{
  readonly error: NoFoodDetected | AnalysisFailed | AnalysisTimeout | ServiceUnavailable
  readonly countsAsFailure: boolean
}> {}

export class Analyzer extends Context.Tag("morsel/Analyzer")<
  Analyzer,
  {
    readonly run: (input: AnalysisInput) => Effect.Effect<AnalysisResult, AnalysisRejected>
    /** Makes the photo as the model receives it (`AnalysisInput.photo`): the longest step before the model call. */
    readonly prepare: (image: Uint8Array, mime: ImageMime) => Effect.Effect<ModelPhoto>
  }
>() {}

const rejected = (error: AnalysisRejected["error"], countsAsFailure = true) => new AnalysisRejected({ error, countsAsFailure })

export const AnalyzerLive = Layer.effect(
  Analyzer,
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const vision = yield* VisionModel
    const foods = yield* FoodDb

    const estimate = (input: AnalysisInput) =>
      Effect.gen(function* () {
        const answer = yield* vision.analyze({ image: input.image, mime: input.mime, language: input.language, photo: input.photo, onCall: input.onModelCall }).pipe(
          Effect.mapError((failure) =>
            failure.reason === "unavailable"
              ? rejected(
                  new ServiceUnavailable({ error: { code: "model_unavailable", message: "the vision model is not configured on this server (its operator sets OPENAI_API_KEY); nothing was charged", request_id: input.requestId } }),
                  false
                )
              : rejected(
                  new AnalysisFailed({ error: { code: "analysis_failed", message: failure.message, request_id: input.requestId } }),
                  countsTowardFailureLimit(failure)
                )
          )
        )
        if (!answer.food_detected || answer.items.length === 0) {
          return yield* rejected(new NoFoodDetected({ error: { code: "no_food_detected", message: "no food was detected in the image", request_id: input.requestId } }))
        }
        const grams =
          input.knownTotalGrams === undefined
            ? answer.items.map((item) => Math.max(0.01, roundGrams(item.estimated_grams)))
            : allocateGrams(answer.items.map((item) => item.estimated_grams), input.knownTotalGrams)
        const items = yield* Effect.forEach(answer.items, (item, i): Effect.Effect<ResultItem> =>
          Effect.map(foods.match({ query: item.query, guessPer100g: item.per_100g }), (match) => {
            const per100g = roundNutrition(Option.match(match, { onNone: () => item.per_100g, onSome: (m) => m.per100g }))
            const itemGrams = grams[i]!
            return {
              name: item.name,
              query: item.query,
              estimated_grams: itemGrams,
              model_confidence: item.confidence,
              nutrition_source: Option.isSome(match) ? "usda" : "ai",
              fdc_id: Option.match(match, { onNone: () => null, onSome: (m) => m.fdcId }),
              matched_name: Option.match(match, { onNone: () => null, onSome: (m) => m.name }),
              per_100g: per100g,
              nutrition: nutritionFor(per100g, itemGrams)
            }
          })
        )
        return { dish_name: answer.dish_name, items }
      })

    const run = (input: AnalysisInput) =>
      Effect.gen(function* () {
        const started = yield* Clock.currentTimeMillis
        const { dish_name, items } = yield* estimate(input).pipe(
          Effect.timeoutFail({
            duration: Duration.millis(settings.analysisTimeoutMs),
            // A deadline passes because the provider is slow or we are: never the caller's failure.
            onTimeout: () =>
              rejected(
                new AnalysisTimeout({ error: { code: "analysis_timeout", message: `analysis took longer than ${settings.analysisTimeoutMs} ms`, request_id: input.requestId } }),
                false
              )
          })
        )
        const finished = yield* Clock.currentTimeMillis
        const result: AnalysisResult = {
          request_id: input.requestId,
          dish_name,
          items,
          totals: sumNutrition(items.map((item) => item.nutrition)),
          estimated_total_grams: sumGrams(items.map((item) => item.estimated_grams)),
          estimate: true,
          model: vision.model,
          matcher_version: foods.matcherVersion,
          processing_ms: Math.max(0, Math.round(finished - started)),
          ...(input.knownTotalGrams === undefined
            ? {}
            : { portion_basis: { type: "supplied_total", total_grams: input.knownTotalGrams, allocation: "photo_estimated_proportions" } as const })
        }
        return result
      })

    const prepare = (image: Uint8Array, mime: ImageMime) =>
      vision.prepare === undefined ? Effect.succeed<ModelPhoto>({ bytes: image, mime }) : vision.prepare({ image, mime })

    return Analyzer.of({ run, prepare })
  })
)
