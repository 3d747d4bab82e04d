/** Closes attempts left running by a vanished instance and gives their reservations back, even if nobody retries. */
import { Clock, Effect, Layer, Schedule } from "effect"
import { AppConfig } from "../config.ts"
import { Funding } from "./Funding.ts"
import { attemptLeaseMs, RequestStore } from "./RequestStore.ts"

export const SWEEP_INTERVAL = "5 minutes"

export const sweepStaleAttempts = Effect.gen(function* () {
  const store = yield* RequestStore
  const funding = yield* Funding
  const settings = yield* AppConfig
  const abandoned = yield* store.abandonStale
  yield* Effect.forEach(abandoned, (stale) => funding.abandon(stale.requestId, stale.funding), { discard: true })
  if (abandoned.length > 0) yield* Effect.logWarning("closed abandoned analyses and returned their reservations", { count: abandoned.length })
  const now = yield* Clock.currentTimeMillis
  yield* funding.releaseOrphans(new Date(now - attemptLeaseMs(settings)))
})

export const StaleAttemptSweeperLive = Layer.scopedDiscard(
  sweepStaleAttempts.pipe(
    Effect.catchAllCause((cause) => Effect.logError("sweeping abandoned analyses failed", cause)),
    Effect.repeat(Schedule.spaced(SWEEP_INTERVAL)),
    Effect.forkScoped
  )
)
