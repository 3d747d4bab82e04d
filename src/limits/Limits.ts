/** The seam for admission control: may this payer start a new analysis now? */
import { Context, Effect, Layer } from "effect"
import type { Payer } from "../analysis/Funding.ts"
import type { TooManyRequests } from "../domain/errors.ts"

/** A held slot of the concurrency limits; released when the analysis ends, however it ends. */
export interface Admission {
  readonly release: Effect.Effect<void>
}

export class Limits extends Context.Tag("morsel/Limits")<
  Limits,
  {
    /** Admit one new analysis for `payer`, or refuse with 429 (the Retry-After header set by the caller). */
    readonly admit: (payer: Payer, requestId: string) => Effect.Effect<Admission, TooManyRequests>
  }
>() {
  /** No limits at all: for tests of other features. */
  static readonly unlimited = Layer.succeed(Limits, { admit: () => Effect.succeed({ release: Effect.void }) })
}
