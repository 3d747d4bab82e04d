// Instances on one database with skewed clocks: an attempt's lease read by another instance's clock is taken over
// early; read by the database-aligned clock, both instances agree. The server's layers run on that clock.
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { RequestStore, RequestStoreLive } from "../../src/analysis/RequestStore.ts"
import { InputFingerprint, PayerId } from "../../src/domain/ids.ts"
import { correctedClock, measureOffset, SharedClockLive } from "../../src/db/sharedClock.ts"
import { TestDatabase } from "../support/database.ts"

const TEN_MINUTES = 10 * 60_000
const LEASE_MS = 2 * 60_000

/** This machine's clock, off by `skewMs` as another machine's may be. */
const skewed = (skewMs: number) => correctedClock(Clock.make(), () => skewMs)

/** The instance's own clock corrected by its measured offset from the database. */
const aligned = (base: Clock.Clock) => Effect.map(measureOffset(base), (offset) => correctedClock(base, () => offset))

/** Instance `clock` starts (or finds) the attempt of one payer's Idempotency-Key; its tag says which. */
const claimOn = (clock: Clock.Clock, key: string) =>
  Effect.flatMap(RequestStore, (store) =>
    store.claim({
      payer: PayerId.make("key:clock-test"),
      idempotencyKey: key,
      fingerprint: InputFingerprint.make("same-input"),
      funding: "credit",
      leaseMs: LEASE_MS
    })
  ).pipe(
    Effect.map(({ claim }) => claim._tag),
    Effect.withClock(clock)
  )

describe("clocks of instances sharing a database", () => {
  layer(RequestStoreLive.pipe(Layer.provideMerge(TestDatabase), Layer.orDie), { excludeTestServices: true })("attempt leases", (it) => {
    it.effect("on their own clocks, an instance 10 minutes ahead takes a running attempt over while its lease runs", () =>
      Effect.gen(function* () {
        expect(yield* claimOn(skewed(0), "skew-own-clocks-0001")).toBe("Started")
        // Two minutes of lease, yet the instance ahead sees it ended: a second attempt of the same request starts.
        expect(yield* claimOn(skewed(TEN_MINUTES), "skew-own-clocks-0001")).toBe("Started")
      }))

    it.effect("on database-aligned clocks, the same two instances agree that the attempt still runs", () =>
      Effect.gen(function* () {
        const behind = yield* aligned(skewed(0))
        const ahead = yield* aligned(skewed(TEN_MINUTES))
        expect(Math.abs(behind.unsafeCurrentTimeMillis() - ahead.unsafeCurrentTimeMillis())).toBeLessThan(1000)
        expect(yield* claimOn(behind, "skew-aligned-0001")).toBe("Started")
        expect(yield* claimOn(ahead, "skew-aligned-0001")).toBe("InProgress")
      }))
  })

  layer(TestDatabase.pipe(Layer.orDie), { excludeTestServices: true })("the shared clock layer", (it) => {
    it.effect("layers built after it read the database's time, whatever this machine's clock says", () =>
      Effect.gen(function* () {
        let seen = 0
        const reader = Layer.effectDiscard(Effect.map(Clock.currentTimeMillis, (ms) => (seen = ms)))
        yield* Layer.build(reader.pipe(Layer.provide(SharedClockLive))).pipe(Effect.scoped, Effect.withClock(skewed(TEN_MINUTES)))
        expect(Math.abs(seen - Date.now())).toBeLessThan(1000)
      }))
  })
})
