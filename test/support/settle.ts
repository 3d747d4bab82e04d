import { Effect } from "effect"

/**
 * Lets background work on TestClock (a sweep's real database I/O) finish: checks `until` every 20 ms of real
 * time, for at most 2 s. Time the service must wait still passes on TestClock; this only waits for I/O.
 */
export const settle = (until: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 100 && !(yield* until); i++) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
  })
