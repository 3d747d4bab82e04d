/** An in-memory Funding for tests and local trials: Bearer `memory_<name>` spends that name's credits. */
import { Context, Effect, HashMap, Layer, Metric, Option, Redacted, Ref } from "effect"
import { PaymentRequired, Unauthorized } from "../domain/errors.ts"
import { PayerId, type RequestId } from "../domain/ids.ts"
import { creditsConsumed } from "../observability/metrics.ts"
import { Funding, type FundingMethod } from "./Funding.ts"

export interface MemoryLedger {
  /** Credits available per name; reservations are held apart until committed or released. */
  readonly balances: Effect.Effect<Readonly<Record<string, number>>>
  readonly reserved: Effect.Effect<number>
}

export class FundingMemoryLedger extends Context.Tag("morsel/FundingMemoryLedger")<FundingMemoryLedger, MemoryLedger>() {}

export const FundingMemory = (credits: Readonly<Record<string, number>>) =>
  Layer.effectContext(
    Effect.gen(function* () {
      const balances = yield* Ref.make(HashMap.fromIterable(Object.entries(credits)))
      const open = yield* Ref.make(HashMap.empty<RequestId, string>())

      const method = (name: string): FundingMethod => ({
        payer: { kind: "credit", id: PayerId.make(`key:${name}`) },
        ready: Effect.flatMap(Ref.get(balances), (map) =>
          Option.getOrElse(HashMap.get(map, name), () => 0) >= 1
            ? Effect.void
            : Effect.fail(new PaymentRequired({ error: { code: "insufficient_credits", message: `no credits left for ${name}` } }))
        ),
        reserve: (requestId) =>
          Ref.modify(balances, (map) => {
            const available = Option.getOrElse(HashMap.get(map, name), () => 0)
            return available >= 1 ? [true, HashMap.set(map, name, available - 1)] : [false, map]
          }).pipe(
            Effect.flatMap((ok) =>
              ok
                ? Ref.update(open, HashMap.set(requestId, name))
                : Effect.fail(new PaymentRequired({ error: { code: "insufficient_credits", message: `no credits left for ${name}` } }))
            ),
            Effect.as({
              // The credit is spent only once the result is saved; a result that cannot be saved gives it back.
              settle: (save) =>
                save.complete(Option.none()).pipe(
                  Effect.tapError(() => release(requestId).pipe(Effect.zipRight(save.failed("not_saved")))),
                  Effect.zipRight(Ref.update(open, HashMap.remove(requestId))),
                  Effect.zipRight(Metric.increment(creditsConsumed)),
                  Effect.as({ paymentResponse: Option.none() })
                ),
              release: release(requestId)
            })
          ),
        resume: () => Effect.fail(new PaymentRequired({ error: { code: "payment_required", message: "nothing to resume" } }))
      })

      const release = (requestId: RequestId) =>
        Effect.flatMap(
          Ref.modify(open, (map) => [HashMap.get(map, requestId), HashMap.remove(map, requestId)]),
          Option.match({
            onNone: () => Effect.void,
            onSome: (name) => Ref.update(balances, (map) => HashMap.modify(map, name, (n) => n + 1))
          })
        )

      const funding = Funding.of({
        identify: (credential) => {
          if (credential._tag === "Payment") {
            return Effect.fail(new PaymentRequired({ error: { code: "x402_unavailable", message: "x402 is not enabled here" } }))
          }
          const name = Option.flatMap(credential.key, (key) => Option.fromNullable(/^memory_(\w+)$/.exec(Redacted.value(key))?.[1]))
          return Option.isSome(name) && Object.hasOwn(credits, name.value)
            ? Effect.succeed(method(name.value))
            : Effect.fail(new Unauthorized({ error: { code: "invalid_key", message: "unknown API key" } }))
        },
        challenge: Effect.fail(new PaymentRequired({ error: { code: "payment_required", message: "send a Bearer key" } })),
        abandon: (requestId) => release(requestId),
        releaseOrphans: () => Effect.void
      })

      const ledger: MemoryLedger = {
        balances: Effect.map(Ref.get(balances), (map) => Object.fromEntries(HashMap.toEntries(map))),
        reserved: Effect.map(Ref.get(open), HashMap.size)
      }
      return Context.make(Funding, funding).pipe(Context.add(FundingMemoryLedger, ledger))
    })
  )
