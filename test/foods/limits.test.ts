// The free food calls' limit per address and per key: exact on one instance, never exceeded by several sharing one
// database, and mostly answered without a database round trip (slices reserved ahead), under TestClock.
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Either, Layer, TestClock } from "effect"
import { AppConfigFromEnv } from "../../src/config.ts"
import { type FoodCaller, FoodLimits, FoodLimitsLive } from "../../src/limits/FoodLimits.ts"
import { realPostgresUrl, sharedTestDatabase } from "../support/database.ts"

const MONDAY_104520 = Date.parse("2026-03-02T10:45:20Z")

/** `count` instances' food limits on one database (on a real server each with its own connection pool). */
const instances = (count: number, limit: number) =>
  Effect.gen(function* () {
    const database = yield* sharedTestDatabase
    const config = AppConfigFromEnv({ LOG_LEVEL: "warning", LIMIT_FOODS_PER_MINUTE: String(limit) }).pipe(Layer.orDie)
    return yield* Effect.forEach(Array.from({ length: count }), () =>
      Layer.build(Layer.mergeAll(FoodLimitsLive, SqlClient.SqlClient.pipe(Layer.effect(SqlClient.SqlClient))).pipe(Layer.provideMerge(database.instance()), Layer.provide(config)))
    )
  })

const admit = (caller: FoodCaller) =>
  Effect.flatMap(FoodLimits, (limits) => limits.admit(caller)).pipe(
    Effect.either,
    Effect.map((e) => (Either.isRight(e) ? "ok" : e.left.error.code))
  )

const tally = (outcomes: ReadonlyArray<string>) => {
  const counts: Record<string, number> = {}
  for (const outcome of outcomes) counts[outcome] = (counts[outcome] ?? 0) + 1
  return counts
}

describe(`free food calls' limit (${realPostgresUrl ? "real PostgreSQL" : "PGlite"})`, () => {
  it.scoped("one instance: exactly the limit per minute for an address, the key's own budget beside it, a new minute afresh", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      const [one] = yield* instances(1, 50)
      const calls = (caller: FoodCaller, n: number) => Effect.provide(Effect.forEach(Array.from({ length: n }), () => admit(caller)), one!)
      expect(tally(yield* calls({ address: "203.0.113.7" }, 53))).toEqual({ ok: 50, rate_limited: 3 })
      // Another address is untouched; a key counts against its address too.
      expect(tally(yield* calls({ address: "203.0.113.8", key: "k1" }, 50))).toEqual({ ok: 50 })
      expect(yield* Effect.provide(admit({ address: "203.0.113.9", key: "k1" }), one!)).toBe("rate_limited")
      // The database holds the minute's count: the calls went there in slices, not one by one.
      const sql = yield* Effect.provide(SqlClient.SqlClient, one!)
      const rows = yield* sql<{ caller: string; calls: number }>`SELECT caller, calls FROM food_call_counts ORDER BY caller`
      expect(rows.find((r) => r.caller === "address:203.0.113.7")!.calls).toBeGreaterThanOrEqual(50)
      yield* TestClock.adjust("40 seconds")
      expect(tally(yield* calls({ address: "203.0.113.7" }, 51))).toEqual({ ok: 50, rate_limited: 1 })
    }))

  it.scoped("three instances sharing one database, 300 calls at once from one address: never more than the limit", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      const limit = 100
      const three = yield* instances(3, limit)
      const all = yield* Effect.all(
        Array.from({ length: 300 }, (_, i) => Effect.provide(admit({ address: "198.51.100.4" }), three[i % 3]!)),
        { concurrency: "unbounded" }
      )
      const { ok = 0 } = tally(all)
      expect(ok).toBeLessThanOrEqual(limit)
      // A slice an instance reserved and did not use is lost for the minute: at most a tenth of the limit each.
      expect(ok).toBeGreaterThanOrEqual(limit - 3 * (limit / 10))
      // Sequential calls alternating between the instances: the same bound.
      yield* TestClock.adjust("1 minute")
      const alternating = yield* Effect.forEach(Array.from({ length: 150 }, (_, i) => i), (i) => Effect.provide(admit({ address: "198.51.100.4" }), three[i % 3]!))
      const turned = tally(alternating).ok ?? 0
      expect(turned).toBeLessThanOrEqual(limit)
      expect(turned).toBeGreaterThanOrEqual(limit - 3 * (limit / 10))
    }))
})
