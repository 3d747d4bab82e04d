/**
 * The limit of the free food calls (search, lookups, nutrition; REST and MCP): LIMIT_FOODS_PER_MINUTE per client
 * address and per key, counted per calendar minute in PostgreSQL so that every instance spends the same budget, in
 * slices reserved ahead (Budget) so that a call seldom waits on the database. Nothing of it counts toward the
 * analysis limits.
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

const counts = rowsOf(Schema.Struct({ caller: Schema.String, calls: Schema.Number }))

/**
 * What this instance may still spend of one budget (an address's or a key's) in one minute without asking the
 * database: the calls it reserved there, and those it used. A reservation takes a slice of the shared count at once
 * (1, then twice as many each time, at most a tenth of the limit), so a caller's calls reach PostgreSQL a few times
 * a minute, not once each. Together the instances never admit more than the limit; a slice an instance reserved and
 * did not use is lost for the minute, so with several instances a caller may be refused up to a tenth of the limit
 * early per instance.
 */
interface Budget {
  readonly window: number
  granted: number
  used: number
  slice: number
  /** The database said the minute's limit is reached: every further call of the minute is refused here. */
  full: boolean
}

/** Past this many budgets an instance forgets them all: it then asks the database again (never a looser limit). */
const MAX_BUDGETS = 50_000

/** The limit kept in PostgreSQL; old minutes are removed every minute. */
export const FoodLimitsLive = Layer.scoped(
  FoodLimits,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { limits } = yield* AppConfig
    const limit = limits.foodsPerMinute
    const maxSlice = Math.max(1, Math.floor(limit / 10))
    const budgets = new Map<string, Budget>()
    yield* Effect.flatMap(Clock.currentTimeMillis, (nowMs) => {
      const current = fixedWindowStart(MINUTE_MS, nowMs)
      for (const [caller, budget] of budgets) if (budget.window < current) budgets.delete(caller)
      return sql`DELETE FROM food_call_counts WHERE window_start < ${current}`
    }).pipe(
      Effect.catchAll(() => Effect.void),
      Effect.repeat(Schedule.spaced(Duration.minutes(1))),
      Effect.forkScoped
    )
    const budgetOf = (caller: string, window: number): Budget => {
      const known = budgets.get(caller)
      if (known !== undefined && known.window === window) return known
      if (budgets.size >= MAX_BUDGETS) budgets.clear()
      const fresh: Budget = { window, granted: 0, used: 0, slice: 1, full: false }
      budgets.set(caller, fresh)
      return fresh
    }
    /** Reserves a slice of each budget that has none left, in one statement; the count goes up even past the limit. */
    const reserve = (window: number, empty: ReadonlyArray<readonly [string, Budget]>) => {
      // The slices as asked: another call's reservation may double a budget's next slice meanwhile.
      const asked = empty.map(([caller, budget]) => ({ caller, budget, slice: budget.slice }))
      for (const { budget } of asked) budget.slice = Math.min(budget.slice * 2, maxSlice)
      return Effect.map(
        orStorageUnavailable(
          counts(sql`
            INSERT INTO food_call_counts ${sql.insert(asked.map(({ caller, slice }) => ({ caller, window_start: window, calls: slice })))}
            ON CONFLICT (caller, window_start) DO UPDATE SET calls = food_call_counts.calls + EXCLUDED.calls
            RETURNING caller, calls`)
        ),
        (rows) => {
          for (const { caller, budget, slice } of asked) {
            const calls = rows.find((row) => row.caller === caller)?.calls ?? Number.POSITIVE_INFINITY
            const granted = Math.max(0, Math.min(slice, limit - (calls - slice)))
            budget.granted += granted
            if (granted < slice) budget.full = true
          }
        }
      )
    }
    return {
      admit: (caller: FoodCaller) =>
        Effect.gen(function* () {
          const nowMs = yield* Clock.currentTimeMillis
          const window = fixedWindowStart(MINUTE_MS, nowMs)
          const callers = caller.key === undefined ? [`address:${caller.address}`] : [`address:${caller.address}`, `key:${caller.key}`]
          const mine = callers.map((c) => [c, budgetOf(c, window)] as const)
          // Another call may spend what this one reserved while it waited: reserve again until it has its share, or
          // a budget is full. Both budgets are spent together: a call either refuses takes nothing of the other.
          for (;;) {
            const empty = mine.filter(([, b]) => b.used >= b.granted)
            if (empty.length === 0) break
            if (empty.some(([, b]) => b.full)) {
              return yield* Effect.fail(new FoodsLimited(Math.max(1, Math.ceil((window + MINUTE_MS - nowMs) / 1000))))
            }
            yield* reserve(window, empty)
          }
          for (const [, b] of mine) b.used++
        })
    }
  })
)

/** No limit: for tests of other features. */
export const FoodLimitsUnlimited = Layer.succeed(FoodLimits, { admit: () => Effect.void })
