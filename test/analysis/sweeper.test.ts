// The sweeper's timing (TestClock): an abandoned attempt's credit comes back when its lease ends, not minutes later.
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, TestClock } from "effect"
import { InputFingerprint } from "../../src/domain/ids.ts"
import { Funding } from "../../src/analysis/Funding.ts"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { RequestStore, RequestStoreLive } from "../../src/analysis/RequestStore.ts"
import { attemptLeaseMs } from "../../src/limits/lease.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { AppConfig, AppConfigFromEnv } from "../../src/config.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { TestDatabase } from "../support/database.ts"
import { bearerCredential } from "../support/funding.ts"
import { startServer } from "../support/server.ts"
import { settle } from "../support/settle.ts"

const SECOND = 1_000

/** A running server (its sweeper included) and a way to leave an attempt behind as a crashed instance would. */
const setup = Effect.gen(function* () {
  const database = yield* Layer.build(TestDatabase.pipe(Layer.orDie))
  const funding = yield* Layer.build(FundingMemory({ bob: 10 }))
  yield* startServer({
    dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, Layer.succeedContext(funding), LimitsUnlimited),
    database: Layer.succeedContext(database)
  })
  const leaseMs = attemptLeaseMs(yield* Effect.provide(AppConfig, AppConfigFromEnv({})))
  /** Claims a key with the server's own lease and reserves bob's credit, then never finishes. */
  const abandonAttempt = (idempotencyKey: string) =>
    Effect.gen(function* () {
      const store = yield* RequestStore
      const method = yield* Effect.flatMap(Funding, (f) => f.identify(bearerCredential("Bearer memory_bob")))
      const { claim } = yield* store.claim({ payer: method.payer.id, idempotencyKey, fingerprint: InputFingerprint.make("x"), funding: "credit", leaseMs })
      if (claim._tag !== "Started") return yield* Effect.dieMessage("expected a new attempt")
      yield* method.reserve(claim.requestId)
    }).pipe(Effect.provide(RequestStoreLive), Effect.provide(Layer.succeedContext(database)), Effect.provide(Layer.succeedContext(funding)))
  const ledger = Context.get(funding, FundingMemoryLedger)
  return { abandonAttempt, leaseMs, ledger }
})

describe("stale attempt sweeper", () => {
  it.scoped("returns the credit of an abandoned attempt within a second of its lease ending, even one started between sweeps", () =>
    Effect.gen(function* () {
      const { abandonAttempt, leaseMs, ledger } = yield* setup
      const bobHas = (n: number) => Effect.map(ledger.balances, (b) => b["bob"] === n)
      yield* TestClock.adjust(10 * SECOND)
      yield* abandonAttempt("sweeper-timing-0001")
      expect(yield* ledger.balances).toEqual({ bob: 9 })
      // The lease ends at 10 s + leaseMs; just before it the credit is still held.
      yield* TestClock.adjust(leaseMs - SECOND)
      yield* settle(bobHas(10))
      expect(yield* ledger.balances).toEqual({ bob: 9 })
      yield* TestClock.adjust(2 * SECOND)
      yield* settle(bobHas(10))
      expect(yield* ledger.balances).toEqual({ bob: 10 })
      expect(yield* ledger.reserved).toBe(0)
    }), 60_000)

  it.scoped("a second abandoned attempt with a later lease is swept at its own lease end", () =>
    Effect.gen(function* () {
      const { abandonAttempt, leaseMs, ledger } = yield* setup
      const bobHas = (n: number) => Effect.map(ledger.balances, (b) => b["bob"] === n)
      yield* abandonAttempt("sweeper-timing-0002")
      yield* TestClock.adjust(30 * SECOND)
      yield* abandonAttempt("sweeper-timing-0003")
      expect(yield* ledger.balances).toEqual({ bob: 8 })
      yield* TestClock.adjust(leaseMs - 30 * SECOND + 2 * SECOND)
      yield* settle(bobHas(9))
      expect(yield* ledger.balances).toEqual({ bob: 9 })
      yield* TestClock.adjust(30 * SECOND)
      yield* settle(bobHas(10))
      expect(yield* ledger.balances).toEqual({ bob: 10 })
    }), 60_000)
})
