/** The optional live USDA FoodData Central search API: rate-limited, cached in the database, never fatal to an analysis. */
import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Clock, Duration, Effect, Option, Redacted, Ref } from "effect"
import { HOUR_MS, makeLocalAllowance } from "../../limits/window.ts"
import { addMore, type FoodRecord, type NutrientAccumulator, toMore, toNutrition } from "./records.ts"
import { cachedSearch, storeSearch } from "./repository.ts"
import { FDC_MORE, SR_MORE } from "./sources.ts"

export const FDC_API_BASE = "https://api.nal.usda.gov/fdc"

export interface FdcApiSettings {
  readonly apiKey: Redacted.Redacted
  /** Without a trailing slash; FDC_API_BASE in production, a local fake in tests. */
  readonly baseUrl: string
  /** FoodData Central allows 1,000 requests per hour per key. */
  readonly requestsPerHour?: number
  readonly timeout?: Duration.DurationInput
}

/** The data types we accept from the API, as its search endpoint spells them: generic foods, no branded products. */
const API_DATA_TYPES = ["Foundation", "SR Legacy", "Survey (FNDDS)"]

const API_DATA_TYPE_NAMES: Record<string, string> = {
  Foundation: "foundation_food",
  "SR Legacy": "sr_legacy_food",
  "Survey (FNDDS)": "survey_fndds_food"
}

/** Nutrient ids (and the legacy nutrient numbers) we read from a search hit. */
const NUTRIENT_KEYS: Record<string, Exclude<keyof NutrientAccumulator, "more">> = {
  "1008": "kcal",
  "208": "kcal",
  "2048": "kcalAtwaterSpecific",
  "958": "kcalAtwaterSpecific",
  "2047": "kcalAtwaterGeneral",
  "957": "kcalAtwaterGeneral",
  "1003": "protein",
  "203": "protein",
  "1004": "fat",
  "204": "fat",
  "1005": "carbs",
  "205": "carbs"
}

interface SearchFood {
  readonly fdcId?: unknown
  readonly description?: unknown
  readonly dataType?: unknown
  readonly foodCategory?: unknown
  readonly foodNutrients?: ReadonlyArray<{
    readonly nutrientId?: unknown
    readonly nutrientNumber?: unknown
    readonly unitName?: unknown
    readonly value?: unknown
  }>
}

/** Turns one search hit into a record; hits without energy are dropped. */
export const recordFromSearchHit = (food: SearchFood): FoodRecord | undefined => {
  if (typeof food.fdcId !== "number" && typeof food.fdcId !== "string") return undefined
  if (typeof food.description !== "string") return undefined
  const nutrients: NutrientAccumulator = {}
  for (const n of food.foodNutrients ?? []) {
    if (typeof n.value !== "number" || String(n.unitName ?? "").toLowerCase() === "kj") continue
    const key = NUTRIENT_KEYS[String(n.nutrientId ?? "")] ?? NUTRIENT_KEYS[String(n.nutrientNumber ?? "")]
    if (key !== undefined && nutrients[key] === undefined) nutrients[key] = n.value
    const more = FDC_MORE[String(n.nutrientId ?? "")] ?? SR_MORE[String(n.nutrientNumber ?? "")]
    if (more !== undefined) addMore(nutrients, more, n.value)
  }
  const per100g = toNutrition(nutrients)
  if (per100g === undefined) return undefined
  const dataType = typeof food.dataType === "string" ? food.dataType : ""
  return {
    source: "fdc_api",
    sourceId: String(food.fdcId),
    dataType: API_DATA_TYPE_NAMES[dataType] ?? dataType,
    description: food.description,
    foodGroup: typeof food.foodCategory === "string" ? food.foodCategory : null,
    commonNames: null,
    descriptors: null,
    manufacturer: null,
    surveyed: dataType !== "SR Legacy",
    per100g,
    more: toMore(nutrients),
    portions: []
  }
}

/**
 * A searcher over the live API: answers from the database cache first; otherwise calls the API unless the hourly
 * budget is spent or the API asked us to back off (429), in which case it answers "nothing" rather than wait.
 */
export const makeFdcSearch = (settings: FdcApiSettings) =>
  Effect.gen(function* () {
    // Per process, as FoodData Central's own 429 is the shared guard: a spent budget only leaves the model's numbers.
    const budget = yield* makeLocalAllowance({ limit: settings.requestsPerHour ?? 1000, windowMs: HOUR_MS })
    const pausedUntil = yield* Ref.make(0)
    const timeout = settings.timeout ?? Duration.seconds(4)
    // The key stays out of logs (x-api-key is redacted by default) and no trace context goes to a third party.
    const client = (yield* HttpClient.HttpClient).pipe(HttpClient.withTracerPropagation(false))

    /** Takes one request from the hourly budget, or says no while the API has asked us to wait. */
    const takePermit = Effect.gen(function* () {
      if ((yield* Clock.currentTimeMillis) < (yield* Ref.get(pausedUntil))) return false
      return yield* budget.take
    })

    const fetchHits = (query: string) =>
      Effect.gen(function* () {
        const request = HttpClientRequest.get(`${settings.baseUrl}/v1/foods/search`).pipe(
          HttpClientRequest.setUrlParams({ query, dataType: API_DATA_TYPES.join(","), pageSize: "25" }),
          HttpClientRequest.setHeader("X-Api-Key", Redacted.value(settings.apiKey)),
          HttpClientRequest.acceptJson
        )
        const response = yield* client
          .execute(request)
          .pipe(Effect.timeoutFail({ duration: timeout, onTimeout: () => new Error("FoodData Central did not answer in time") }))
        if (response.status === 429) {
          const retryAfter = Number(response.headers["retry-after"])
          const now = yield* Clock.currentTimeMillis
          yield* Ref.set(pausedUntil, now + (Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : HOUR_MS))
          return yield* Effect.fail(new Error("FoodData Central rate limit reached"))
        }
        if (response.status < 200 || response.status >= 300) return yield* Effect.fail(new Error(`FoodData Central answered ${response.status}`))
        const body = yield* response.json
        const hits: ReadonlyArray<SearchFood> =
          typeof body === "object" && body !== null && "foods" in body && Array.isArray(body.foods) ? body.foods : []
        return hits.flatMap((food) => {
          const record = recordFromSearchHit(food)
          return record === undefined ? [] : [record]
        })
      })

    /** Candidate records for a query; None when the API could not be asked (budget, back-off, failure). */
    const search = (rawQuery: string) =>
      Effect.gen(function* () {
        const query = rawQuery.trim().toLowerCase().replace(/\s+/g, " ")
        const cached = yield* cachedSearch(query)
        if (cached !== undefined) return Option.some(cached)
        if (!(yield* takePermit)) return Option.none<ReadonlyArray<FoodRecord>>()
        const records = yield* fetchHits(query)
        yield* storeSearch(query, records, new Date(yield* Clock.currentTimeMillis))
        return Option.some(records)
      }).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning("FoodData Central search failed; the item keeps the model's numbers").pipe(
            Effect.annotateLogs({ error: error instanceof Error ? error.message : String(error) }),
            Effect.as(Option.none<ReadonlyArray<FoodRecord>>())
          )
        )
      )

    return { search }
  }).pipe(Effect.provide(FetchHttpClient.layer))
