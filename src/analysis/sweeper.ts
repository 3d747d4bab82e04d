/** Closes attempts left running by a vanished instance and gives their reservations back, even if nobody retries. */
import { Effect, Layer, Schedule } from "effect"
import { Funding } from "./Funding.ts"
import { RequestStore } from "./RequestStore.ts"

export const SWEEP_INTERVAL = "1 minute"

export const sweepStaleAttempts = Effect.gen(function* () {
  const store = yield* RequestStore
  const funding = yield* Funding
  const abandoned = yield* store.abandonStale
  yield* Effect.forEach(abandoned, (stale) => funding.abandon(stale.requestId, stale.funding), { discard: true })
  if (abandoned.length > 0) yield* Effect.logWarning("closed abandoned analyses and returned their reservations", { count: abandoned.length })
})

export const StaleAttemptSweeperLive = Layer.scopedDiscard(
  sweepStaleAttempts.pipe(
    Effect.catchAllCause((cause) => Effect.logError("sweeping abandoned analyses failed", cause)),
    Effect.repeat(Schedule.spaced(SWEEP_INTERVAL)),
    Effect.forkScoped
  )
)
