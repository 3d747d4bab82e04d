/** Background passes: the one way a layer runs periodic work, in a fiber that ends with the layer's scope. */
import { type Duration, Effect } from "effect"

/**
 * Forks into the current scope a loop that waits `firstAfter` (if given), runs `pass`, then waits the pause that
 * pass answers before the next one. `pass` handles its own failures, so only the scope's end stops the loop.
 */
export const forkPasses = <R>(pass: Effect.Effect<Duration.DurationInput, never, R>, firstAfter?: Duration.DurationInput) => {
  const loop = Effect.forever(Effect.flatMap(pass, Effect.sleep))
  return Effect.forkScoped(firstAfter === undefined ? loop : Effect.zipRight(Effect.sleep(firstAfter), loop))
}
