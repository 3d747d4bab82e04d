/** The background reconciler: settles (or fails) x402 payments left pending that no caller came back for. */
import { Cause, Clock, Context, Duration, Effect, Layer, Option, PubSub } from "effect"
import { forkPasses } from "../background.ts"
import type { RequestId } from "../domain/ids.ts"
import { Payments } from "./Payments.ts"
import { PaymentStore } from "./PaymentStore.ts"

export interface ReconcilePass {
  readonly examined: number
  readonly settled: ReadonlyArray<{ readonly requestId: RequestId; readonly paymentResponse: string }>
  readonly failed: ReadonlyArray<{ readonly requestId: RequestId; readonly reason: string }>
  readonly pending: number
}

/** Told when a payment left pending reaches its end, so the request it pays for can follow (optional). */
export class PaymentResolutions extends Context.Tag("morsel/x402/PaymentResolutions")<
  PaymentResolutions,
  {
    readonly settled: (requestId: RequestId, paymentResponse: string) => Effect.Effect<void>
    readonly failed: (requestId: RequestId, reason: string) => Effect.Effect<void>
  }
>() {}

export class X402Reconciler extends Context.Tag("morsel/x402/X402Reconciler")<
  X402Reconciler,
  {
    /**
     * One pass over payments untouched for a while: submitted ones, and any whose request still waits on its
     * payment (also what an operator's "reconcile now" runs). Claims of failed attempts are released first.
     */
    readonly runOnce: Effect.Effect<ReconcilePass>
    /** Every finished pass, background or on demand. */
    readonly passes: PubSub.PubSub<ReconcilePass>
  }
>() {}

export interface ReconcilerOptions {
  /** Pause between passes. */
  readonly interval?: Duration.DurationInput
  /** A payment is left to its own request while it was touched more recently than this. */
  readonly minAge?: Duration.DurationInput
  readonly batch?: number
  /** How long an instance keeps a payment to itself while working it (others skip it meanwhile). */
  readonly lease?: Duration.DurationInput
}

export const emptyPass: ReconcilePass = { examined: 0, settled: [], failed: [], pending: 0 }

/** Runs a pass every `interval` in a fiber tied to the layer's scope. */
export const X402ReconcilerLive = (options: ReconcilerOptions = {}) =>
  Layer.scoped(
    X402Reconciler,
    Effect.gen(function* () {
      const payments = yield* Payments
      const store = yield* PaymentStore
      const resolutions = yield* Effect.serviceOption(PaymentResolutions)
      const interval = Duration.decode(options.interval ?? "30 seconds")
      const minAge = Duration.toMillis(options.minAge ?? "30 seconds")
      const batch = options.batch ?? 50
      const lease = Duration.toMillis(options.lease ?? "5 minutes")
      const passes = yield* Effect.acquireRelease(PubSub.unbounded<ReconcilePass>(), PubSub.shutdown)

      /** The next due payment, leased to this instance while it works it. */
      const takeNext = (before: Date) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => store.takeDue(before, new Date(now + lease)))

      const runOnce = Effect.gen(function* () {
        const settled: Array<{ requestId: RequestId; paymentResponse: string }> = []
        const failed: Array<{ requestId: RequestId; reason: string }> = []
        // Fixed for the pass: a payment touched during it is not due again before the next one.
        const before = new Date((yield* Clock.currentTimeMillis) - minAge)
        // Claims of failed attempts whose release failed would otherwise hold their authorizations for good.
        yield* store.releaseAbandoned(Option.none()).pipe(
          Effect.tap((released) =>
            released.length > 0 ? Effect.logInfo("x402 claims of failed attempts released", { count: released.length }) : Effect.void
          ),
          Effect.catchAll((e) => Effect.logWarning("releasing x402 claims of failed attempts failed", e.message))
        )
        let examined = 0
        while (examined < batch) {
          const next = yield* takeNext(before)
          if (Option.isNone(next)) break
          examined++
          const requestId = next.value.requestId
          yield* Effect.gen(function* () {
            const outcome = yield* payments.reconcile(requestId, Option.none(), false)
            if (outcome._tag === "Settled") {
              settled.push({ requestId, paymentResponse: outcome.paymentResponse })
              if (Option.isSome(resolutions)) yield* resolutions.value.settled(requestId, outcome.paymentResponse)
            } else if (outcome._tag === "Failed") {
              failed.push({ requestId, reason: outcome.reason })
              if (Option.isSome(resolutions)) yield* resolutions.value.failed(requestId, outcome.reason)
            }
            // Rest it until the next pass: pending, or final with a request the resolution could not update yet.
            yield* outcome._tag === "Pending" ? store.countAttempt(requestId) : store.touch(requestId)
          }).pipe(Effect.ensuring(Effect.ignore(store.endLease(requestId))))
        }
        const pass: ReconcilePass = { examined, settled, failed, pending: examined - settled.length - failed.length }
        if (pass.examined > 0) yield* Effect.logInfo("x402 reconciliation pass", { settled: settled.length, failed: failed.length, pending: pass.pending })
        yield* PubSub.publish(passes, pass)
        return pass
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning("x402 reconciliation pass failed", Cause.pretty(cause)).pipe(Effect.as(emptyPass))
        )
      )

      yield* forkPasses(Effect.as(runOnce, interval), interval)
      return { runOnce, passes }
    })
  )

/** When x402 is off there is nothing to reconcile. */
export const X402ReconcilerDisabled = Layer.effect(
  X402Reconciler,
  Effect.map(PubSub.unbounded<ReconcilePass>(), (passes) => ({ runOnce: Effect.succeed(emptyPass), passes }))
)
