/** The HTTP contract of the foods feature: search, one food, nutrition for named foods; free, a Bearer key optional. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { InvalidRequest, NotFound, PayloadTooLarge, ServiceUnavailable, TooManyRequests, Unauthorized, UnsupportedMediaType } from "../../domain/errors.ts"
import { Food, FoodIdPath, FoodList, FoodsSearchParams, NutritionRequest, NutritionResult } from "../core/schemas.ts"

const FREE =
  "Free: no payment and no key needed (a Bearer key, if sent, must be valid: 401 invalid_key). No model call, nothing charged. LIMIT_FOODS_PER_MINUTE calls per client address and per key (429 rate_limited with Retry-After). Refusals in the order 415/400, 401, 429."

export class FoodsGroup extends HttpApiGroup.make("foods")
  .add(
    HttpApiEndpoint.get("search", "/v1/foods")
      .setUrlParams(FoodsSearchParams)
      .addSuccess(FoodList)
      .addError(InvalidRequest)
      .addError(Unauthorized)
      .addError(TooManyRequests)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "Search the local foods (USDA), the plain everyday record first")
      .annotate(OpenApi.Description, `q: 1–200 characters; limit: 1–25 (default 10). ${FREE}`)
  )
  .add(
    HttpApiEndpoint.get("food", "/v1/foods/:fdc_id")
      .setPath(FoodIdPath)
      .addSuccess(Food)
      .addError(InvalidRequest)
      .addError(Unauthorized)
      .addError(NotFound)
      .addError(TooManyRequests)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "One food by its fdc_id: per-100 g nutrition and household portions (404 food_not_found)")
      .annotate(OpenApi.Description, FREE)
  )
  .add(
    HttpApiEndpoint.post("nutrition", "/v1/nutrition")
      .setPayload(NutritionRequest)
      .addSuccess(NutritionResult)
      .addError(Schema.Union(InvalidRequest, PayloadTooLarge, UnsupportedMediaType))
      .addError(Unauthorized)
      .addError(NotFound)
      .addError(TooManyRequests)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "Nutrition of named foods (by fdc_id or text; grams or a household portion), or of a meal in words, per item and in total")
      .annotate(
        OpenApi.Description,
        `Exactly one of items (1–20) or text. An item nothing matches is never counted as zero: it is listed in unmatched with suggestions, and complete is false. A portion's grams are amount × grams ÷ the row's amount, from the first row whose unit matches (case-blind, whole unit or first word; "tbsp" is "tablespoon", "slices" "slice"). ` +
          `A meal in words ({"text": "2 eggs, a slice of toast with butter and a latte"}) is read into foods, each with an amount or none: numbers in digits, fractions (1/2, 1 1/2, ½) and words (a, one … twelve, half, a couple of); weights (g, kg, oz 28.35 g, lb) as stated; measuring volumes (ml, l, cup, tbsp, tsp, fl oz) through the food's own volume portion, else 1 g per ml; containers (glass or mug 240 ml, can 355 ml, bottle 500 ml, bowl 355 ml) as the food's portion or that volume; household words (slice, piece, link, large, …) as the food's portion; a count ("2 eggs") as that many pieces (medium where the food has one); no amount as one typical serving. Each item has text (the words read) and grams_basis (stated, portion or typical); a food nothing matches, or whose unit it cannot take, is in unmatched with its text. 400 invalid_request naming text when it is blank, over 2,000 characters or over 20 foods. ${FREE}`
      )
  )
  .annotate(OpenApi.Description, "The local food database for search, corrections of a result and meals described in words: free, limited") {}
