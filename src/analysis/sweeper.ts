/** Closes attempts left running by a vanished instance and gives their reservations back, even if nobody retries. */
import { Clock, Duration, Effect, Layer, Option } from "effect"
import { forkPasses } from "../background.ts"
import { AppConfig } from "../config.ts"
import { Funding } from "./Funding.ts"
import { attemptLeaseMs } from "../limits/lease.ts"
import { RequestStore } from "./RequestStore.ts"

/** How long after a lease ends its sweep runs: a lease is over only once it has strictly passed. */
export const SWEEP_GRACE_MS = 1_000
/** The wait before another try when a sweep itself failed (storage trouble). */
export const SWEEP_RETRY_MS = 10_000

/**
 * One sweep; answers when the next one is due: just after the earliest running lease ends, and never later
 * than one lease from now, because an attempt that starts meanwhile (on any instance) holds a full lease.
 */
export const sweepStaleAttempts = Effect.gen(function* () {
  const store = yield* RequestStore
  const funding = yield* Funding
  const leaseMs = attemptLeaseMs(yield* AppConfig)
  const abandoned = yield* store.abandonStale
  yield* Effect.forEach(abandoned, (stale) => funding.abandon(stale.requestId, stale.funding), { discard: true })
  if (abandoned.length > 0) yield* Effect.logWarning("closed abandoned analyses and returned their reservations", { count: abandoned.length })
  const now = yield* Clock.currentTimeMillis
  yield* funding.releaseOrphans(new Date(now - leaseMs))
  const nextLease = Option.map(yield* store.nextLeaseEnd, (end) => end.getTime() + SWEEP_GRACE_MS)
  return Math.min(now + leaseMs, Option.getOrElse(nextLease, () => Infinity))
})

/** Sweeps at start-up, then whenever the next lease ends. */
export const StaleAttemptSweeperLive = Layer.scopedDiscard(
  forkPasses(
    Effect.gen(function* () {
      const dueAt = yield* sweepStaleAttempts.pipe(
        Effect.catchAllCause((cause) =>
          Effect.logError("sweeping abandoned analyses failed", cause).pipe(
            Effect.zipRight(Effect.map(Clock.currentTimeMillis, (now) => now + SWEEP_RETRY_MS))
          )
        )
      )
      const now = yield* Clock.currentTimeMillis
      return Duration.millis(Math.max(0, dueAt - now))
    })
  )
)
