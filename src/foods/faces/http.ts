/** HTTP handlers of the foods group; the answers themselves are nutrition.ts's, shared with the MCP tools. */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { AppConfig } from "../../config.ts"
import { MorselApi } from "../../http/Api.ts"
import { makeClientAddress } from "../../request/clientAddress.ts"
import { withRetryAfter } from "../../limits/http.ts"
import { admitFoodRequest } from "./caller.ts"
import { lookupFood, searchFoods } from "../core/nutrition.ts"
import { nutritionOf } from "../core/nutritionAnswer.ts"
import { SEARCH_LIMIT_DEFAULT } from "../core/schemas.ts"

/**
 * A food answer as the JSON it is. Its values are built to the schema's types and the schema's encoding changes
 * nothing in them (test/foods/http.test.ts holds the two equal), so its walk over every field, about 1 ms for 20
 * nutrition items, is not made; requests are still decoded and checked by the schemas.
 */
const asJson = (body: object) => HttpServerResponse.unsafeJson(body)

export const FoodsHttpLive = HttpApiBuilder.group(MorselApi, "foods", (handlers) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const clientAddress = makeClientAddress(config.trustedProxies)
    const admitted = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => admitFoodRequest(request, clientAddress))
    return handlers
      .handle("search", ({ urlParams }) =>
        Effect.zipRight(admitted, searchFoods(urlParams.q, urlParams.limit ?? SEARCH_LIMIT_DEFAULT)).pipe(Effect.map(asJson), withRetryAfter)
      )
      .handle("food", ({ path }) => Effect.zipRight(admitted, lookupFood(path.fdc_id)).pipe(Effect.map(asJson), withRetryAfter))
      .handle("nutrition", ({ payload }) => Effect.zipRight(admitted, nutritionOf(payload)).pipe(Effect.map(asJson), withRetryAfter))
  })
)
