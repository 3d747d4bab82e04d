// The credit endpoints' capacity limit: per key, service-wide and per address for unknown keys, in PostgreSQL, under TestClock.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, TestClock } from "effect"
import { CreditCapacity, CreditCapacityWith } from "../../src/limits/Capacity.ts"
import { TestDatabase } from "../support/database.ts"

const MONDAY_104520 = Date.parse("2026-03-02T10:45:20Z")

const capacityLayer = (perKeyPerMinute: number, globalPerMinute: number, unknownKeysPerAddressPerMinute = 2) =>
  CreditCapacityWith({ perKeyPerMinute, globalPerMinute, unknownKeysPerAddressPerMinute }).pipe(Layer.provideMerge(TestDatabase), Layer.orDie)

const outcome = <E extends { readonly error: { readonly code: string } }>(effect: Effect.Effect<void, E>) =>
  Effect.either(effect).pipe(Effect.map((e) => (Either.isRight(e) ? "ok" : e.left.error.code)))

const admitUnknown = (address: string) => Effect.flatMap(CreditCapacity, (capacity) => outcome(capacity.admitUnknownKey(address)))

const admit = (subject: string) =>
  Effect.flatMap(CreditCapacity, (capacity) => capacity.admit(subject)).pipe(
    Effect.either,
    Effect.map((e) => (Either.isRight(e) ? "ok" : e.left.error.code))
  )

const admitMany = (subject: string, n: number) => Effect.forEach(Array.from({ length: n }), () => admit(subject))

describe("credit endpoints capacity", () => {
  it.effect("per key: the 4th request of a minute is refused until the minute ends; other keys go on", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      expect(yield* admitMany("alice", 4)).toEqual(["ok", "ok", "ok", "capacity_limited"])
      expect(yield* admit("bob")).toBe("ok")
      // 10:45:59.999: still the same minute.
      yield* TestClock.adjust(39_999)
      expect(yield* admit("alice")).toBe("capacity_limited")
      // 10:46:00.000: a new minute, a new count.
      yield* TestClock.adjust(1)
      expect(yield* admitMany("alice", 4)).toEqual(["ok", "ok", "ok", "capacity_limited"])
    }).pipe(Effect.provide(capacityLayer(3, 100))))

  it.effect("service-wide: the minute's total is shared by all keys; one key's refused requests do not use it up", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      expect(yield* admitMany("mallory", 10)).toEqual([...Array(3).fill("ok"), ...Array(7).fill("capacity_limited")])
      expect(yield* admit("alice")).toBe("ok")
      expect(yield* admit("bob")).toBe("ok")
      expect(yield* admit("carol")).toBe("capacity_limited")
      yield* TestClock.adjust(40_000)
      expect(yield* admit("carol")).toBe("ok")
    }).pipe(Effect.provide(capacityLayer(3, 5))))

  it.effect("unknown keys: counted per client address, apart from the keys' and the service's minutes", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      expect(yield* Effect.forEach(Array.from({ length: 4 }), () => admitUnknown("203.0.113.7"))).toEqual([
        "ok",
        "ok",
        "ok",
        "capacity_limited"
      ])
      expect(yield* admitUnknown("203.0.113.8")).toBe("ok")
      // The service-wide minute (5) is untouched by the five unknown-key requests.
      expect(yield* admitMany("alice", 3)).toEqual(["ok", "ok", "ok"])
      expect(yield* admitMany("bob", 2)).toEqual(["ok", "ok"])
      yield* TestClock.adjust(40_000)
      expect(yield* admitUnknown("203.0.113.7")).toBe("ok")
    }).pipe(Effect.provide(capacityLayer(3, 5, 3))))
})
