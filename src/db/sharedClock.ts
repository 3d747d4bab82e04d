/**
 * The time every instance on one database agrees on: this process's clock corrected by its measured offset from
 * the database server's clock, so result retention, attempt leases and limit windows do not depend on which
 * instance's clock looks. Sleeping and timeouts stay on the local clock.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { rowsOf } from "./rows.ts"

/** Clocks drift slowly; a minute between measurements keeps instances within a few milliseconds of one another. */
const REMEASURE_EVERY = Duration.minutes(1)

const serverTime = rowsOf(Schema.Struct({ ms: Schema.NumberFromString }))

/** The database's clock minus `base`'s, read halfway through one round trip. */
export const measureOffset = (base: Clock.Clock) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const before = base.unsafeCurrentTimeMillis()
    const [row] = yield* serverTime(sql`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::text AS ms`)
    const after = base.unsafeCurrentTimeMillis()
    return row === undefined ? 0 : row.ms - (before + after) / 2
  })

/** `base` read with a correction: the correction changes as it is measured again. */
export const correctedClock = (base: Clock.Clock, offsetMs: () => number): Clock.Clock => {
  const millis = () => Math.round(base.unsafeCurrentTimeMillis() + offsetMs())
  const nanos = () => base.unsafeCurrentTimeNanos() + BigInt(Math.round(offsetMs() * 1_000_000))
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    currentTimeMillis: Effect.sync(millis),
    unsafeCurrentTimeNanos: nanos,
    currentTimeNanos: Effect.sync(nanos),
    sleep: (duration) => base.sleep(duration)
  }
}

/**
 * Sets the database-aligned clock for every layer built after this one (and the fibers they start). A failed
 * re-measurement keeps the last offset.
 */
export const SharedClockLive: Layer.Layer<never, never, SqlClient.SqlClient> = Layer.scopedDiscard(
  Effect.gen(function* () {
    const base = yield* Effect.clock
    let offset = yield* measureOffset(base).pipe(
      Effect.tapError((error) => Effect.logWarning("the database clock could not be read; this instance's own clock is used", error)),
      Effect.orElseSucceed(() => 0)
    )
    yield* measureOffset(base).pipe(
      Effect.tap((measured) => Effect.sync(() => (offset = measured))),
      Effect.ignore,
      Effect.repeat(Schedule.spaced(REMEASURE_EVERY)),
      Effect.forkScoped
    )
    yield* Effect.withClockScoped(correctedClock(base, () => offset))
  })
)
