// The free food calls' limit per address and per paid key: exact on one instance, never exceeded by several sharing
// one database, mostly answered without a database round trip (slices reserved ahead), a burst on one instance costing
// the others at most a tenth of the limit, and addresses counted only as keyed digests; under TestClock.
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import type { CallToolResult } from "@modelcontextprotocol/client"
import { Effect, Either, Layer, TestClock } from "effect"
import { migrations } from "../../migrations/index.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { AppConfigFromEnv } from "../../src/config.ts"
import { KeyFingerprintsLive } from "../../src/credits/keys.ts"
import { FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { CreditCapacityLive } from "../../src/limits/Capacity.ts"
import { type FoodCaller, FoodLimits, FoodLimitsLive } from "../../src/limits/FoodLimits.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { connect, fakeStripe, keyWith, toolErrorCode } from "../support/clients.ts"
import { realPostgresUrl, sharedTestDatabase } from "../support/database.ts"
import { withinOneMinute } from "../support/minute.ts"
import { startServer } from "../support/server.ts"

const MONDAY_104520 = Date.parse("2026-03-02T10:45:20Z")

/** `count` instances' food limits on one database (on a real server each with its own connection pool). */
const instances = (count: number, limit: number) =>
  Effect.gen(function* () {
    const database = yield* sharedTestDatabase
    const config = AppConfigFromEnv({ LOG_LEVEL: "warning", LIMIT_FOODS_PER_MINUTE: String(limit) }).pipe(Layer.orDie)
    return yield* Effect.forEach(Array.from({ length: count }), () =>
      Layer.build(
        FoodLimitsLive.pipe(
          Layer.provideMerge(Layer.mergeAll(KeyFingerprintsLive, CreditCapacityLive, SqlClient.SqlClient.pipe(Layer.effect(SqlClient.SqlClient)))),
          Layer.provideMerge(database.instance()),
          Layer.provide(config)
        )
      )
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
  it.scoped("one instance: exactly the limit per minute for an address, a paid key's own budget beside it, a new minute afresh", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      const [one] = yield* instances(1, 50)
      const calls = (caller: FoodCaller, n: number) => Effect.provide(Effect.forEach(Array.from({ length: n }), () => admit(caller)), one!)
      expect(tally(yield* calls({ address: "203.0.113.7" }, 53))).toEqual({ ok: 50, rate_limited: 3 })
      // Another address is untouched; a key's calls count against the key alone, whichever address sends them.
      expect(tally(yield* calls({ key: "k1" }, 50))).toEqual({ ok: 50 })
      expect(yield* Effect.provide(admit({ key: "k1" }), one!)).toBe("rate_limited")
      expect(tally(yield* calls({ address: "203.0.113.8" }, 50))).toEqual({ ok: 50 })
      // The database holds the minute's counts, in slices, not one by one, and holds no address in clear.
      const sql = yield* Effect.provide(SqlClient.SqlClient, one!)
      const rows = yield* sql<{ caller: string; calls: number }>`SELECT caller, calls FROM food_call_counts ORDER BY caller`
      expect(rows.map((r) => r.caller).filter((c) => c.includes("203.0.113"))).toEqual([])
      const addresses = rows.filter((r) => r.caller.startsWith("address:"))
      expect(addresses.map((r) => r.caller.replace(/[0-9a-f]{64}$/, "<digest>"))).toEqual(["address:<digest>", "address:<digest>"])
      expect(addresses.every((r) => r.calls >= 50)).toBe(true)
      yield* TestClock.adjust("40 seconds")
      expect(tally(yield* calls({ address: "203.0.113.7" }, 51))).toEqual({ ok: 50, rate_limited: 1 })
    }))

  it.scoped("the migration deletes the counts written with an address in clear and keeps the digested ones", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      const [one] = yield* instances(1, 50)
      expect(yield* Effect.provide(admit({ address: "203.0.113.7" }), one!)).toBe("ok")
      const sql = yield* Effect.provide(SqlClient.SqlClient, one!)
      yield* sql`INSERT INTO food_call_counts (caller, window_start, calls) VALUES ('address:203.0.113.7', ${MONDAY_104520 - 20_000}, 5), ('address:2001:db8:0:1::/64', ${MONDAY_104520 - 20_000}, 2)`
      yield* Effect.provide(migrations["0015_food_call_digests"], one!)
      const callers = (yield* sql<{ caller: string }>`SELECT caller FROM food_call_counts`).map((r) => r.caller)
      expect(callers.length).toBe(1)
      expect(callers[0]).toMatch(/^address:[0-9a-f]{64}$/)
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

  it.scoped("twenty calls at once from one address on one instance reserve at most a tenth of the limit beyond them: the other instance keeps the rest", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      const limit = 100
      const [busy, quiet] = yield* instances(2, limit)
      const burst = yield* Effect.all(
        Array.from({ length: 20 }, () => Effect.provide(admit({ address: "198.51.100.9" }), busy!)),
        { concurrency: "unbounded" }
      )
      expect(tally(burst)).toEqual({ ok: 20 })
      const sql = yield* Effect.provide(SqlClient.SqlClient, busy!)
      const [reserved] = yield* sql<{ calls: number }>`SELECT COALESCE(SUM(calls), 0)::int AS calls FROM food_call_counts`
      expect(reserved!.calls).toBeLessThanOrEqual(20 + limit / 10)
      const rest = yield* Effect.forEach(Array.from({ length: limit }), () => Effect.provide(admit({ address: "198.51.100.9" }), quiet!))
      const { ok = 0 } = tally(rest)
      expect(20 + ok).toBeLessThanOrEqual(limit)
      expect(20 + ok).toBeGreaterThanOrEqual(limit - limit / 10)
    }))
})

describe(`a chat host relaying many users' food calls from one address (${realPostgresUrl ? "real PostgreSQL" : "PGlite"})`, () => {
  it.scopedLive("each paying user has a budget of their own; keyless calls and keys that never paid share the host's", () =>
    Effect.gen(function* () {
      const stripe = yield* fakeStripe
      const { url } = yield* startServer({
        env: { ...stripe.env, LIMIT_FOODS_PER_MINUTE: "5" },
        dependencies: Layer.mergeAll(VisionModelLive, FoodDbMemory(shippedFoods()), FundingLive, LimitsUnlimited)
      })
      const [alice, bob, unpaid] = [yield* keyWith(url, stripe, 500), yield* keyWith(url, stripe, 500), yield* keyWith(url, stripe, 0)]
      // The host's connections, one per user (each with the user's key) and one for users without a key.
      const user = (key?: string) => connect(url, key === undefined ? {} : { authorization: `Bearer ${key}` })
      const [alicesCalls, bobsCalls, keylessCalls, unpaidCalls] = [yield* user(alice), yield* user(bob), yield* user(), yield* user(unpaid)]
      const searches = (mcp: typeof alicesCalls, n: number) =>
        Effect.forEach(Array.from({ length: n }), () =>
          Effect.map(
            Effect.promise(() => mcp.callTool({ name: "search_foods", arguments: { query: "rice" } })),
            (result) => (result.isError === true ? String(toolErrorCode(result as CallToolResult)) : "ok")
          )
        )
      yield* withinOneMinute(30_000)
      // One user spends their whole minute: the others are not refused for it.
      expect(tally(yield* searches(alicesCalls, 7))).toEqual({ ok: 5, rate_limited: 2 })
      expect(tally(yield* searches(bobsCalls, 5))).toEqual({ ok: 5 })
      expect(tally(yield* searches(keylessCalls, 6))).toEqual({ ok: 5, rate_limited: 1 })
      // A key that only opened a checkout is as cheap to make as none: it counts with the host's address.
      expect(tally(yield* searches(unpaidCalls, 1))).toEqual({ rate_limited: 1 })
    }), 180_000)
})
