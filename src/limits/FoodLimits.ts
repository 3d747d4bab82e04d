/**
 * The limit of the free food calls (search, lookups, nutrition; REST and MCP): LIMIT_FOODS_PER_MINUTE per client
 * address and per key, counted per calendar minute in PostgreSQL so that every instance spends the same budget.
 * Nothing of it counts toward the analysis limits.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Context, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { rowsOf } from "../db/rows.ts"
import { orStorageUnavailable } from "../db/storage.ts"
import { type ServiceUnavailable, TooManyRequests } from "../domain/errors.ts"
import { fixedWindowStart, MINUTE_MS } from "./window.ts"

/** Who is calling: always a client address, and a key's fingerprint when one was sent (each has its own budget). */
export interface FoodCaller {
  readonly address: string
  readonly key?: string | undefined
}

export class FoodLimits extends Context.Tag("morsel/FoodLimits")<
  FoodLimits,
  {
    /** Counts one call, or refuses it with 429 `rate_limited` (Retry-After: the seconds left in the minute). */
    readonly admit: (caller: FoodCaller) => Effect.Effect<void, FoodsLimited | ServiceUnavailable>
  }
>() {}

/** The 429 of the food calls: its wait is what is left of the minute, not the analysis limits' minute. */
export class FoodsLimited extends TooManyRequests {
  constructor(readonly waitSeconds: number) {
    super({ error: { code: "rate_limited", message: `too many food calls this minute; retry in ${waitSeconds} s` } })
  }
  override get retryAfterSeconds(): number {
    return this.waitSeconds
  }
}

const counts = rowsOf(Schema.Struct({ calls: Schema.Number }))

/** The limit kept in PostgreSQL; old minutes are removed every minute. */
export const FoodLimitsLive = Layer.scoped(
  FoodLimits,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { limits } = yield* AppConfig
    const limit = limits.foodsPerMinute
    yield* Effect.flatMap(Clock.currentTimeMillis, (nowMs) => sql`DELETE FROM food_call_counts WHERE window_start < ${fixedWindowStart(MINUTE_MS, nowMs)}`).pipe(
      Effect.catchAll(() => Effect.void),
      Effect.repeat(Schedule.spaced(Duration.minutes(1))),
      Effect.forkScoped
    )
    return {
      admit: (caller: FoodCaller) =>
        Effect.gen(function* () {
          const nowMs = yield* Clock.currentTimeMillis
          const window = fixedWindowStart(MINUTE_MS, nowMs)
          const callers = caller.key === undefined ? [`address:${caller.address}`] : [`address:${caller.address}`, `key:${caller.key}`]
          // One statement for both budgets: the address's and the key's count go up together.
          const rows = yield* orStorageUnavailable(
            counts(sql`
              INSERT INTO food_call_counts ${sql.insert(callers.map((c) => ({ caller: c, window_start: window, calls: 1 })))}
              ON CONFLICT (caller, window_start) DO UPDATE SET calls = food_call_counts.calls + 1
              RETURNING calls`)
          )
          if (rows.some((row) => row.calls > limit)) {
            return yield* Effect.fail(new FoodsLimited(Math.max(1, Math.ceil((window + MINUTE_MS - nowMs) / 1000))))
          }
        })
    }
  })
)

/** No limit: for tests of other features. */
export const FoodLimitsUnlimited = Layer.succeed(FoodLimits, { admit: () => Effect.void })
