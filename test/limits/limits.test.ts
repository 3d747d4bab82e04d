// Rolling windows, concurrency leases and failure pauses of new analyses, on a real database under TestClock.
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, TestClock } from "effect"
import { RequestStore, RequestStoreLive } from "../../src/analysis/RequestStore.ts"
import { InputFingerprint } from "../../src/domain/ids.ts"
import { AppConfig, AppConfigFromEnv } from "../../src/config.ts"
import { claimCheck, Limits, LimitsLive } from "../../src/limits/Limits.ts"
import { DAY_MS, HOUR_MS } from "../../src/limits/window.ts"
import { realPostgresUrl, sharedTestDatabase } from "../support/database.ts"
import { credit, failAnalysis, limitsLayer, outcome, start, startReleased, tally, wallet } from "./support.ts"

const MINUTE_MS = 60_000
/** A Monday 10:45 UTC: the hour tests cross a calendar hour that must not reset anything. */
const MONDAY_1045 = Date.parse("2026-03-02T10:45:00Z")

const peekCode = Effect.flatMap(Limits, (limits) => limits.peek).pipe(
  Effect.either,
  Effect.map((e) => (Either.isRight(e) ? "open" : e.left.error.code))
)

/** Spreads analyses over payers so that only the window under test can refuse. */
const manyPayers = (i: number) => credit(`payer-${i % 7}`)

describe("limits on new analyses", () => {
  it.effect("service-wide hour: the 31st in a rolling hour is refused; the next is allowed once the oldest turns an hour old", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      expect(tally(yield* startReleased(manyPayers, 20))).toEqual({ admitted: 20 })
      // 11:05: a calendar hour would start afresh here; the rolling hour still holds all 20.
      yield* TestClock.adjust(20 * MINUTE_MS)
      expect(tally(yield* startReleased(manyPayers, 10))).toEqual({ admitted: 10 })
      expect(outcome(yield* start(credit("someone-new")))).toBe("rate_limited")
      expect(outcome(yield* start(wallet("someone-new")))).toBe("rate_limited")
      expect(yield* peekCode).toBe("rate_limited")
      // 11:44:59.999: the 10:45 analyses are still inside the hour.
      yield* TestClock.setTime(MONDAY_1045 + HOUR_MS - 1)
      expect(outcome(yield* start(credit("someone-new")))).toBe("rate_limited")
      // 11:45:00.000: exactly the 20 of 10:45 leave; the 10 of 11:05 stay.
      yield* TestClock.setTime(MONDAY_1045 + HOUR_MS)
      expect(yield* peekCode).toBe("open")
      expect(tally(yield* startReleased(manyPayers, 21))).toEqual({ admitted: 20, rate_limited: 1 })
    }).pipe(Effect.provide(limitsLayer())))

  it.effect("service-wide day: the 201st in a rolling day is refused until the oldest turns a day old", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      expect(tally(yield* startReleased(manyPayers, 150))).toEqual({ admitted: 150 })
      yield* TestClock.adjust(6 * HOUR_MS)
      expect(tally(yield* startReleased(manyPayers, 51))).toEqual({ admitted: 50, rate_limited: 1 })
      // Tuesday 00:00: a calendar day would reset; the rolling day does not.
      yield* TestClock.setTime(Date.parse("2026-03-03T00:00:00Z"))
      expect(outcome(yield* start(credit("fresh")))).toBe("rate_limited")
      yield* TestClock.setTime(MONDAY_1045 + DAY_MS - 1)
      expect(outcome(yield* start(credit("fresh")))).toBe("rate_limited")
      yield* TestClock.setTime(MONDAY_1045 + DAY_MS)
      expect(tally(yield* startReleased(manyPayers, 151))).toEqual({ admitted: 150, rate_limited: 1 })
    }).pipe(Effect.provide(limitsLayer({ LIMIT_GLOBAL_PER_HOUR: "1000" }))))

  it.effect("per payer: the 101st of one key in a rolling day is spend_limited; other payers go on; a day later it may start again", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      const alice = credit("alice")
      expect(tally(yield* startReleased(alice, 60))).toEqual({ admitted: 60 })
      yield* TestClock.adjust(12 * HOUR_MS)
      expect(tally(yield* startReleased(alice, 41))).toEqual({ admitted: 40, spend_limited: 1 })
      expect(outcome(yield* start(credit("bob")))).toBe("admitted")
      const wallet1 = wallet("0xabc")
      expect(tally(yield* startReleased(wallet1, 3))).toEqual({ admitted: 3 })
      yield* TestClock.setTime(MONDAY_1045 + DAY_MS - 1)
      expect(outcome(yield* start(alice))).toBe("spend_limited")
      yield* TestClock.setTime(MONDAY_1045 + DAY_MS)
      expect(tally(yield* startReleased(alice, 61))).toEqual({ admitted: 60, spend_limited: 1 })
    }).pipe(Effect.provide(limitsLayer({ LIMIT_GLOBAL_PER_HOUR: "1000", LIMIT_GLOBAL_PER_DAY: "1000" }))))

  it.effect("concurrency: 3 running in all, 2 of them x402; a released slot is free at once", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      const w1 = yield* start(wallet("w1"))
      const w2 = yield* start(wallet("w2"))
      expect([outcome(w1), outcome(w2)]).toEqual(["admitted", "admitted"])
      expect(outcome(yield* start(wallet("w3")))).toBe("rate_limited")
      expect(yield* peekCode).toBe("rate_limited")
      const c1 = yield* start(credit("c1"))
      expect(outcome(c1)).toBe("admitted")
      expect(outcome(yield* start(credit("c2")))).toBe("rate_limited")
      if (c1._tag === "admitted") yield* c1.admission.release
      // The freed slot is a credit one in effect: x402 still has its 2 running.
      expect(outcome(yield* start(wallet("w3")))).toBe("rate_limited")
      expect(outcome(yield* start(credit("c2")))).toBe("admitted")
      if (w1._tag === "admitted") {
        yield* w1.admission.release
        yield* w1.admission.release
      }
      expect(outcome(yield* start(credit("c3")))).toBe("admitted")
      expect(outcome(yield* start(wallet("w4")))).toBe("rate_limited")
    }).pipe(Effect.provide(limitsLayer())))

  it.effect("a slot of an instance that died mid-analysis is freed when the analysis lease ends", () =>
    Effect.gen(function* () {
      const settings = yield* AppConfig
      const leaseMs = settings.analysisTimeoutMs + settings.x402.confirmTimeoutMs + 60_000
      yield* TestClock.setTime(MONDAY_1045)
      // Never released: their instance is gone.
      for (const name of ["a", "b", "c"]) expect(outcome(yield* start(credit(name)))).toBe("admitted")
      expect(outcome(yield* start(credit("d")))).toBe("rate_limited")
      yield* TestClock.adjust(leaseMs - 1)
      expect(outcome(yield* start(credit("d")))).toBe("rate_limited")
      yield* TestClock.adjust(1)
      expect(tally(yield* Effect.forEach(["d", "e", "f", "g"], (n) => start(credit(n))))).toEqual({ admitted: 3, rate_limited: 1 })
    }).pipe(Effect.provide(limitsLayer())))

  it.effect("x402 share: 15 per rolling hour while card credits still start", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      expect(tally(yield* startReleased((i) => wallet(`w${i % 3}`), 16))).toEqual({ admitted: 15, rate_limited: 1 })
      expect(yield* peekCode).toBe("rate_limited")
      expect(tally(yield* startReleased(manyPayers, 15))).toEqual({ admitted: 15 })
      expect(outcome(yield* start(credit("late")))).toBe("rate_limited")
      yield* TestClock.adjust(HOUR_MS)
      expect(outcome(yield* start(wallet("w0")))).toBe("admitted")
    }).pipe(Effect.provide(limitsLayer())))

  it.effect("x402 share: 100 per rolling day", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      expect(tally(yield* startReleased((i) => wallet(`w${i % 5}`), 101))).toEqual({ admitted: 100, rate_limited: 1 })
      expect(outcome(yield* start(credit("card")))).toBe("admitted")
      yield* TestClock.adjust(DAY_MS - 1)
      expect(outcome(yield* start(wallet("w9")))).toBe("rate_limited")
      yield* TestClock.adjust(1)
      expect(outcome(yield* start(wallet("w9")))).toBe("admitted")
    }).pipe(Effect.provide(limitsLayer({ LIMIT_GLOBAL_PER_HOUR: "1000", LIMIT_X402_PER_HOUR: "1000" }))))

  it.effect("failure_limit after 25 counted failures of one payer in a rolling day; provider refusals do not count", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      const mallory = credit("mallory")
      for (let i = 0; i < 24; i++) yield* failAnalysis(yield* start(mallory), true)
      for (let i = 0; i < 5; i++) yield* failAnalysis(yield* start(mallory), false)
      yield* TestClock.adjust(3 * HOUR_MS)
      const last = yield* start(mallory)
      expect(outcome(last)).toBe("admitted")
      yield* failAnalysis(last, true)
      expect(outcome(yield* start(mallory))).toBe("failure_limit")
      expect(outcome(yield* start(credit("honest")))).toBe("admitted")
      // The first 24 failures leave the window a day after they happened; the 25th (three hours later) stays.
      yield* TestClock.setTime(MONDAY_1045 + DAY_MS - 1)
      expect(outcome(yield* start(mallory))).toBe("failure_limit")
      yield* TestClock.setTime(MONDAY_1045 + DAY_MS)
      expect(outcome(yield* start(mallory))).toBe("admitted")
    }).pipe(Effect.provide(limitsLayer({ LIMIT_GLOBAL_PER_HOUR: "1000" }))))

  it.effect("an attempt refused right after admission (its payment or credit) counts toward no window", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      const store = yield* RequestStore
      for (let i = 0; i < 40; i++) {
        const started = yield* start(credit("broke"))
        expect(outcome(started)).toBe("admitted")
        if (started._tag === "admitted") {
          // The pipeline's order on a refused reservation: forget the claimed request, then release the slot.
          yield* Effect.orDie(store.forget(started.requestId))
          yield* started.admission.release
        }
      }
      expect(tally(yield* startReleased(manyPayers, 31))).toEqual({ admitted: 30, rate_limited: 1 })
    }).pipe(Effect.provide(limitsLayer())))

  it.effect("a new key is admitted by the statement that records it: a refusal leaves no attempt and no admission behind", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      const sql = yield* SqlClient.SqlClient
      const rows = Effect.map(
        sql<{ attempts: number; admissions: number }>`
          SELECT (SELECT count(*)::int FROM analysis_requests) AS attempts, (SELECT count(*)::int FROM limit_admissions) AS admissions`,
        ([row]) => row
      )
      const held = yield* Effect.forEach(["a", "b", "c"], (name) => start(credit(name)))
      expect(held.map(outcome)).toEqual(["admitted", "admitted", "admitted"])
      expect(yield* rows).toEqual({ attempts: 3, admissions: 3 })
      // Both ways a fourth is refused while three hold their slots; neither leaves a trace.
      expect(outcome(yield* start(credit("d"), "in claim"))).toBe("rate_limited")
      expect(outcome(yield* start(credit("d"), "after claim"))).toBe("rate_limited")
      expect(yield* rows).toEqual({ attempts: 3, admissions: 3 })
      // The claim itself answers with the limit its statement reached.
      const store = yield* RequestStore
      const inClaim = yield* Effect.flatMap(Limits, (limits) => limits.inClaim(credit("e")))
      const { claim } = yield* store.claim({
        payer: credit("e").id,
        idempotencyKey: "claim-with-admission",
        fingerprint: InputFingerprint.make("f"),
        funding: "credit",
        leaseMs: 60_000,
        admission: claimCheck(inClaim)
      })
      expect(claim).toMatchObject({ _tag: "Started", reached: "concurrent" })
      if (claim._tag === "Started") yield* store.forget(claim.requestId)
      for (const started of held) if (started._tag === "admitted") yield* started.admission.release
      expect(outcome(yield* start(credit("d"), "in claim"))).toBe("admitted")
      expect(yield* rows).toEqual({ attempts: 4, admissions: 4 })
    }).pipe(Effect.provide(limitsLayer())))

  it.effect("every value is a setting", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      expect(tally(yield* startReleased(credit("a"), 3))).toEqual({ admitted: 2, spend_limited: 1 })
      expect(tally(yield* startReleased(manyPayers, 3))).toEqual({ admitted: 2, rate_limited: 1 })
      yield* TestClock.adjust(HOUR_MS)
      expect(tally(yield* startReleased((i) => credit(`x${i}`), 2))).toEqual({ admitted: 1, rate_limited: 1 })
    }).pipe(
      Effect.provide(limitsLayer({ LIMIT_PAYER_PER_DAY: "2", LIMIT_GLOBAL_PER_HOUR: "4", LIMIT_GLOBAL_PER_DAY: "5" }))
    ))
})

describe(`concurrent admissions (${realPostgresUrl ? "real PostgreSQL, two connection pools" : "PGlite"})`, () => {
  /** Two instances' worth of limits and request stores on one database, each with its own pool on a real server. */
  const twoInstances = (env: Readonly<Record<string, string>> = {}) => Effect.gen(function* () {
    const database = yield* sharedTestDatabase
    const config = AppConfigFromEnv({ LOG_LEVEL: "warning", ...env }).pipe(Layer.orDie)
    const instance = () =>
      Layer.build(Layer.mergeAll(LimitsLive, RequestStoreLive).pipe(Layer.provideMerge(database.instance()), Layer.provide(config)))
    return [yield* instance(), yield* instance()] as const
  })

  it.scoped.each(["in claim", "after claim"] as const)("40 analyses at once across two instances, admitted %s: exactly 3 hold slots, the rest rate_limited", (by) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      const instances = yield* twoInstances()
      const all = yield* Effect.all(
        Array.from({ length: 40 }, (_, i) => Effect.provide(start(credit(`c${i}`), by), instances[i % 2]!)),
        { concurrency: "unbounded" }
      )
      expect(tally(all)).toEqual({ admitted: 3, rate_limited: 37 })
      const sql = yield* Effect.provide(SqlClient.SqlClient, instances[0]!)
      const [row] = yield* sql<{ attempts: number; admissions: number }>`
        SELECT (SELECT count(*)::int FROM analysis_requests WHERE payer LIKE 'key:c%') AS attempts,
               (SELECT count(*)::int FROM limit_admissions WHERE payer LIKE 'key:c%') AS admissions`
      expect(row).toEqual({ attempts: 3, admissions: 3 })
    }))

  it.scoped("60 analyses at once across two instances: exactly 30 in the hour, at most 15 of them x402", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      // Concurrency limits out of the way: every refusal here is a window's.
      const instances = yield* twoInstances({ LIMIT_CONCURRENT: "1000", LIMIT_X402_CONCURRENT: "1000" })
      const payer = (i: number) => (i % 3 === 0 ? credit(`c${i % 7}`) : wallet(`w${i % 5}`))
      const all = yield* Effect.all(
        Array.from({ length: 60 }, (_, i) =>
          Effect.provide(
            Effect.tap(start(payer(i)), (s) => (s._tag === "admitted" ? s.admission.release : Effect.void)),
            instances[i % 2]!
          ).pipe(Effect.map((s) => ({ s, kind: payer(i).kind })))
        ),
        { concurrency: "unbounded" }
      )
      const admitted = all.filter(({ s }) => s._tag === "admitted")
      expect(admitted.filter(({ kind }) => kind === "x402").length).toBeLessThanOrEqual(15)
      expect(admitted).toHaveLength(30)
      expect(tally(all.map(({ s }) => s))).toEqual({ admitted: 30, rate_limited: 30 })
      const sql = yield* Effect.provide(SqlClient.SqlClient, instances[0]!)
      const [row] = yield* sql<{ n: number; x: number }>`
        SELECT count(*)::int AS n, count(*) FILTER (WHERE funding = 'x402')::int AS x FROM limit_admissions`
      expect(row).toEqual({ n: admitted.length, x: admitted.filter(({ kind }) => kind === "x402").length })
    }))
})
