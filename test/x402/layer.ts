/** The x402 services on a real local chain and a fresh test database, configured like production through the environment. */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { SqlClient } from "@effect/sql"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import type { PaymentRequired as X402PaymentRequired } from "@x402/core/types"
import { Effect, FiberRef, Layer, Option, type Scope } from "effect"
import { AppConfigFromEnv } from "../../src/config.ts"
import type { PaymentRequired } from "../../src/domain/errors.ts"
import type { PaymentResolutions, ReconcilerOptions } from "../../src/x402/Reconciler.ts"
import { X402Funding, X402Layer } from "../../src/x402/X402Funding.ts"
import { ChainMemory } from "../../src/x402/ChainMemory.ts"
import { Chain, type LocalChain } from "../support/chain.ts"
import { TestDatabase } from "../support/database.ts"
import { TestChain } from "../support/memoryChain.ts"
import { x402Env } from "../support/x402.ts"

/** X402Funding + X402Reconciler (and the chain, config and database they run on) for one test file. */
export const X402Test = (
  options: {
    /** Extra settings, possibly from resources started for the test (a facilitator). */
    readonly env?: (chain: LocalChain) => Effect.Effect<Readonly<Record<string, string>>, never, Scope.Scope>
    readonly reconciler?: ReconcilerOptions
    readonly resolutions?: Layer.Layer<PaymentResolutions, never, SqlClient.SqlClient>
    readonly payers?: number
  } = {}
) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const chain = yield* Chain
      const extra = options.env ? yield* options.env(chain) : {}
      const config = AppConfigFromEnv(x402Env(chain, extra)).pipe(Layer.orDie)
      const x402 = X402Layer(options.reconciler).pipe(Layer.orDie)
      return (options.resolutions ? x402.pipe(Layer.provide(options.resolutions)) : x402).pipe(Layer.provideMerge(config))
    })
  ).pipe(
    Layer.provideMerge(TestDatabase.pipe(Layer.orDie)),
    Layer.provideMerge(TestChain.fromLocal),
    Layer.provideMerge(Chain.layer({ payers: options.payers ?? 4 }))
  )

/** The same on the memory chain (X402Layer with ChainMemory): for tests whose subject is not the chain itself. */
export const X402MemoryTest = (
  options: { readonly reconciler?: ReconcilerOptions; readonly resolutions?: Layer.Layer<PaymentResolutions>; readonly payers?: number } = {}
) =>
  Layer.unwrapEffect(
    Effect.map(TestChain, (chain) => {
      const x402 = X402Layer(options.reconciler, ChainMemory).pipe(Layer.orDie)
      return (options.resolutions ? x402.pipe(Layer.provide(options.resolutions)) : x402).pipe(
        Layer.provideMerge(AppConfigFromEnv(x402Env(chain)).pipe(Layer.orDie))
      )
    })
  ).pipe(Layer.provideMerge(TestDatabase.pipe(Layer.orDie)), Layer.provideMerge(TestChain.memory({ payers: options.payers ?? 4 })))

/** The challenge as a client reads it from a 402. */
export const challenge = Effect.flatMap(X402Funding, (x402) => Effect.flip(x402.challenge)).pipe(
  Effect.map((e) => e.payment_required as X402PaymentRequired)
)

/** The response headers the effect set so far (what HttpApp's pre-response handlers would add to its answer). */
export const responseHeaders = Effect.gen(function* () {
  const handler = yield* FiberRef.get(HttpApp.currentPreResponseHandlers)
  if (Option.isNone(handler)) return {} as Readonly<Record<string, string>>
  const request = HttpServerRequest.fromWeb(new Request("http://127.0.0.1/v1/analyze", { method: "POST" }))
  const response = yield* handler.value(request, HttpServerResponse.empty())
  return response.headers
})

/** Runs `self`, expecting a 402, and returns it with the headers it set (a fresh fiber, so no earlier headers leak in). */
export const refusal = <R>(self: Effect.Effect<unknown, unknown, R>) =>
  Effect.gen(function* () {
    const error = yield* Effect.flip(self)
    const headers = yield* responseHeaders
    return { error, headers }
  }).pipe(Effect.locally(HttpApp.currentPreResponseHandlers, Option.none()))

export const decodeChallengeHeader = (headers: Readonly<Record<string, string>>) => {
  const value = headers["payment-required"]
  return value === undefined ? undefined : decodePaymentRequiredHeader(value)
}

export type { PaymentRequired }
