/** Layers of the FoodDb seam: the live one (warm index loaded from PostgreSQL, optional FDC API), in-memory and empty ones. */
import { SqlClient } from "@effect/sql"
import { Clock, Deferred, Duration, Effect, Layer, Option, Ref, Schedule } from "effect"
import { AppConfig } from "../../config.ts"
import { FDC_API_BASE, type FdcApiSettings, makeFdcSearch } from "./fdcApi.ts"
import { FoodDb, type FoodQuery, type FoodReader } from "./FoodDb.ts"
import { buildIndexInTurns } from "./foodIndex.ts"
import { buildIndex, type FoodIndex, MATCHER_VERSION, matchIn } from "./matcher.ts"
import type { FoodRecord } from "./records.ts"
import { latestImport, loadRecords } from "./repository.ts"
import { foodIn, namedIn, searchIn, trustedIn } from "./search.ts"
import { loadShippedFoods } from "./shipped.ts"

/** How often a running server checks whether another process imported foods (then it reloads its index). */
export const FOOD_INDEX_REFRESH = Duration.seconds(30)

/** A FoodDb over a fixed set of records (tests, tools). */
export const FoodDbMemory = (records: ReadonlyArray<FoodRecord>) =>
  Layer.sync(FoodDb, () => {
    const index = buildIndex(records)
    return { matcherVersion: MATCHER_VERSION, match: (query: FoodQuery) => Effect.sync(() => matchIn(index, query)), ...readersOf(Effect.succeed(index)) }
  })

/** Search, names and lookups over one index. */
export const readerOf = (index: FoodIndex): FoodReader => ({
  search: (text, limit) => searchIn(index, text, limit),
  named: (text) => Option.getOrUndefined(namedIn(index, text)),
  trusted: (text, limit) => trustedIn(index, text, limit),
  food: (fdcId) => Option.getOrUndefined(foodIn(index, fdcId))
})

/** Search, names and lookups over the index of the moment. */
const readersOf = (index: Effect.Effect<FoodIndex>) => ({
  search: (text: string, limit: number) => Effect.map(index, (i) => searchIn(i, text, limit)),
  named: (text: string) => Effect.map(index, (i) => namedIn(i, text)),
  food: (fdcId: string) => Effect.map(index, (i) => foodIn(i, fdcId)),
  reader: Effect.map(index, readerOf)
})

const NO_FOODS: FoodReader = { search: () => [], named: () => undefined, trusted: () => [], food: () => undefined }

/** Search, names and lookups of a FoodDb without foods (for test doubles of `match`). */
export const noFoods = {
  search: () => Effect.succeed([]),
  named: () => Effect.succeed(Option.none()),
  food: () => Effect.succeed(Option.none()),
  reader: Effect.succeed(NO_FOODS)
}

/** A FoodDb that never matches: every item keeps the model's numbers (`nutrition_source: "ai"`). */
export const FoodDbEmpty = Layer.succeed(FoodDb, {
  matcherVersion: `${MATCHER_VERSION}+empty`,
  match: () => Effect.succeed(Option.none()),
  ...noFoods
})

export interface FoodDbLiveOptions {
  /** The live FoodData Central API for queries the local records cannot answer. */
  readonly fdcApi?: FdcApiSettings
  readonly refresh?: Duration.DurationInput
  /** Store the shipped copy of SR28 first when the database holds no foods (the server and the sandbox do). */
  readonly shipped?: boolean
}

/** The live FoodDb with explicit options: index built once the server listens, rebuilt when a newer import is seen. */
export const makeFoodDbLive = (options: FoodDbLiveOptions = {}) =>
  Layer.scoped(
    FoodDb,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      if (options.shipped === true) yield* loadShippedFoods
      const load = Effect.gen(function* () {
        const importId = yield* latestImport
        const records = yield* loadRecords()
        const started = yield* Clock.currentTimeMillis
        const index = yield* Effect.promise((signal) => buildIndexInTurns(records, signal))
        return { importId, index, buildMs: (yield* Clock.currentTimeMillis) - started }
      }).pipe(Effect.withSpan("foods.loadIndex"), Effect.provideService(SqlClient.SqlClient, sql))
      // Building the index of SR28 takes 1–3 s, and up to 13 s on a loaded machine: the server answers (/health among
      // the rest) while it is built, and the calls that need foods wait for it.
      const state = yield* Ref.make<{ importId: string | undefined; index: FoodIndex } | undefined>(undefined)
      const ready = yield* Deferred.make<FoodIndex>()
      const first = load.pipe(
        Effect.tapError((error) => Effect.logWarning("food index load failed; trying again").pipe(Effect.annotateLogs({ error: String(error) }))),
        Effect.retry(Schedule.exponential(Duration.millis(200)).pipe(Schedule.union(Schedule.spaced(Duration.seconds(10))))),
        Effect.tap((loaded) => Ref.set(state, loaded)),
        Effect.tap((loaded) => Deferred.succeed(ready, loaded.index)),
        Effect.tap((loaded) => Effect.logInfo("food index ready").pipe(Effect.annotateLogs({ foods: loaded.index.size, build_ms: loaded.buildMs })))
      )

      const refresh = Effect.gen(function* () {
        const current = yield* Ref.get(state)
        if ((yield* latestImport) === current?.importId) return
        const next = yield* load
        yield* Ref.set(state, next)
        yield* Effect.logInfo("food index reloaded after an import").pipe(Effect.annotateLogs({ foods: next.index.size, build_ms: next.buildMs }))
      }).pipe(
        Effect.catchAll((error) => Effect.logWarning("food index refresh failed; keeping the current index").pipe(Effect.annotateLogs({ error: String(error) }))),
        Effect.provideService(SqlClient.SqlClient, sql)
      )
      yield* first.pipe(
        Effect.zipRight(refresh.pipe(Effect.repeat(Schedule.spaced(options.refresh ?? FOOD_INDEX_REFRESH)))),
        Effect.forkScoped
      )
      /** The index of the moment, once the first one is built. */
      const current = Effect.flatMap(Deferred.await(ready), (first) => Effect.map(Ref.get(state), (s) => s?.index ?? first))

      const api = options.fdcApi === undefined ? undefined : yield* makeFdcSearch(options.fdcApi)
      const matchLocal = (query: FoodQuery) => Effect.map(current, (index) => matchIn(index, query))
      const match =
        api === undefined
          ? matchLocal
          : (query: FoodQuery) =>
              Effect.flatMap(matchLocal(query), (local) =>
                Option.isSome(local)
                  ? Effect.succeed(local)
                  : api.search(query.query).pipe(
                      Effect.map(
                        Option.flatMap((records) => (records.length === 0 ? Option.none() : matchIn(buildIndex(records), query)))
                      ),
                      Effect.provideService(SqlClient.SqlClient, sql)
                    )
              )
      return {
        matcherVersion: api === undefined ? MATCHER_VERSION : `${MATCHER_VERSION}+fdc-api`,
        match,
        ...readersOf(current)
      }
    })
  )

/** The live FoodDb as the server uses it: the shipped SR28 copy on a first start, the FoodData Central API when FDC_API_KEY is set. */
export const FoodDbLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (settings) =>
    makeFoodDbLive({
      shipped: true,
      ...(Option.isSome(settings.fdcApiKey) ? { fdcApi: { apiKey: settings.fdcApiKey.value, baseUrl: FDC_API_BASE } } : {})
    })
  )
)
