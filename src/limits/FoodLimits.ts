/**
 * The limit of the free food calls (search, lookups, nutrition; REST and MCP): LIMIT_FOODS_PER_MINUTE per paid key,
 * or per client address for every other call, counted per calendar minute in PostgreSQL so that every instance
 * spends the same budget, in slices reserved ahead (Budget) so that a call seldom waits on the database. Nothing of
 * it counts toward the analysis limits. Addresses are counted only as keyed digests, as every other count.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Context, Deferred, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { KeyFingerprints } from "../credits/keys.ts"
import { rowsOf } from "../db/rows.ts"
import { orStorageUnavailable } from "../db/storage.ts"
import { type ServiceUnavailable, TooManyRequests } from "../domain/errors.ts"
import { CreditCapacity } from "./Capacity.ts"
import { fixedWindowStart, MINUTE_MS } from "./window.ts"

/**
 * Whose budget a call spends: a key that paid spends its own (a chat host relaying many users from one address
 * does not let one of them spend the others'); any other call its client address's.
 */
export type FoodCaller = { readonly address: string } | { readonly key: string }

export class FoodLimits extends Context.Tag("morsel/FoodLimits")<
  FoodLimits,
  {
    /** Counts one call, or refuses it with 429 `rate_limited` (Retry-After: the seconds left in the minute). */
    readonly admit: (caller: FoodCaller) => Effect.Effect<void, FoodsLimited | ServiceUnavailable>
    /**
     * Counts one call with a key the service does not know against its client address's allowance for unknown keys
     * (the one the analysis and credit endpoints count); past it 429 `rate_limited` with a minute's wait.
     */
    readonly admitUnknownKey: (address: string) => Effect.Effect<void, TooManyRequests>
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

/**
 * What this instance may still spend of one budget in one minute without asking the database: the calls it reserved
 * there, and those it used. A reservation takes a slice of the shared count at once (1, then twice as many each time
 * or as many as calls wait for it, at most a tenth of the limit), so a caller's calls reach PostgreSQL a few times a
 * minute, not once each. One reservation per budget is in flight at a time (the calls that find the budget spent
 * meanwhile wait for it), so a slice is only asked for once the last is used: together the instances never admit
 * more than the limit, and what an instance reserved and did not use (lost for the minute) is at most one slice, so
 * with several instances a caller may be refused up to a tenth of the limit early per instance, bursts included.
 */
interface Budget {
  readonly window: number
  granted: number
  used: number
  slice: number
  /** The database said the minute's limit is reached: every further call of the minute is refused here. */
  full: boolean
  /** The reservation in flight, done when its slice is granted (or failed). */
  reserving: Deferred.Deferred<void> | undefined
  /** Calls waiting for that reservation: the next slice is sized for them. */
  waiting: number
}

/** Past this many budgets an instance forgets them all: it then asks the database again (never a looser limit). */
const MAX_BUDGETS = 50_000

/** The limit kept in PostgreSQL; old minutes are removed every minute. */
export const FoodLimitsLive = Layer.scoped(
  FoodLimits,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { limits } = yield* AppConfig
    const keys = yield* KeyFingerprints
    const capacity = yield* CreditCapacity
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
    /** The same keyed digest of an address as the unknown-key allowance counts (never the address in clear). */
    const addressDigest = (address: string) => keys.digest(`address:${address}`)
    const nameOf = (caller: FoodCaller) => ("key" in caller ? `key:${caller.key}` : `address:${addressDigest(caller.address)}`)
    const budgetOf = (caller: string, window: number): Budget => {
      const known = budgets.get(caller)
      if (known !== undefined && known.window === window) return known
      if (budgets.size >= MAX_BUDGETS) budgets.clear()
      const fresh: Budget = { window, granted: 0, used: 0, slice: 1, full: false, reserving: undefined, waiting: 0 }
      budgets.set(caller, fresh)
      return fresh
    }
    /** Reserves the budget's next slice; the count goes up even past the limit. Those waiting for it go on when it ends, however. */
    const reserve = (caller: string, budget: Budget) =>
      Effect.gen(function* () {
        const done = yield* Deferred.make<void>()
        budget.reserving = done
        const slice = Math.min(maxSlice, Math.max(budget.slice, budget.waiting + 1))
        budget.slice = Math.min(slice * 2, maxSlice)
        const rows = yield* orStorageUnavailable(
          counts(sql`
            INSERT INTO food_call_counts ${sql.insert({ caller, window_start: budget.window, calls: slice })}
            ON CONFLICT (caller, window_start) DO UPDATE SET calls = food_call_counts.calls + EXCLUDED.calls
            RETURNING calls`)
        ).pipe(
          Effect.ensuring(
            Effect.suspend(() => {
              budget.reserving = undefined
              return Deferred.succeed(done, undefined)
            })
          )
        )
        const calls = rows[0]?.calls ?? Number.POSITIVE_INFINITY
        const granted = Math.max(0, Math.min(slice, limit - (calls - slice)))
        budget.granted += granted
        if (granted < slice) budget.full = true
      })
    const admit = (caller: FoodCaller) =>
      Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const window = fixedWindowStart(MINUTE_MS, nowMs)
        const name = nameOf(caller)
        const budget = budgetOf(name, window)
        for (;;) {
          if (budget.used < budget.granted) {
            budget.used++
            return
          }
          if (budget.full) return yield* Effect.fail(new FoodsLimited(Math.max(1, Math.ceil((window + MINUTE_MS - nowMs) / 1000))))
          const inFlight = budget.reserving
          if (inFlight === undefined) {
            yield* reserve(name, budget)
            continue
          }
          budget.waiting++
          yield* Deferred.await(inFlight).pipe(
            Effect.ensuring(
              Effect.sync(() => {
                budget.waiting--
              })
            )
          )
        }
      })
    const admitUnknownKey = (address: string) =>
      Effect.mapError(
        capacity.admitUnknownKey(addressDigest(address)),
        (refused) => new TooManyRequests({ error: { code: "rate_limited", message: refused.error.message } })
      )
    return FoodLimits.of({ admit, admitUnknownKey })
  })
)

/** No limit: for tests of other features. */
export const FoodLimitsUnlimited = Layer.succeed(FoodLimits, { admit: () => Effect.void, admitUnknownKey: () => Effect.void })
