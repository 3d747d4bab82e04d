/**
 * The `Sandbox-Scenario` request header: forces one documented outcome of an analysis so integrators can exercise
 * every path. Each scenario acts where the real outcome arises (the model, the limits, the chain), so the rest of
 * the service answers exactly as it would in production, and nothing is charged.
 */
import { HttpApp, HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Effect, Either, Layer, Option, Schema } from "effect"
import { Funding } from "../analysis/Funding.ts"
import { readPayment } from "../x402/protocol.ts"
import { NO_FOOD } from "../analysis/VisionModelScripted.ts"
import { VisionFailure, VisionModel } from "../analysis/VisionModel.ts"
import { InvalidRequest, TooManyRequests } from "../domain/errors.ts"
import { errorResponse } from "../http/transport.ts"
import { Limits } from "../limits/Limits.ts"
import { MemoryChain } from "../x402/MemoryChain.ts"

export const SCENARIO_HEADER = "sandbox-scenario"
export const SANDBOX_HEADER = "morsel-sandbox"

export const Scenario = Schema.Literal("no_food", "analysis_failed", "analysis_timeout", "payment_pending", "rate_limited")
export type Scenario = typeof Scenario.Type

/** The scenario of the request being served; none outside the sandbox or without the header. */
export class CurrentScenario extends Context.Reference<CurrentScenario>()("morsel/sandbox/CurrentScenario", {
  defaultValue: (): Option.Option<Scenario> => Option.none()
}) {}

const is = (scenario: Scenario) => Effect.map(CurrentScenario, Option.contains(scenario))

const unknownScenario = (value: string) =>
  errorResponse(
    new InvalidRequest({
      error: {
        code: "invalid_request",
        message: `unknown Sandbox-Scenario "${value}"; use one of ${Scenario.literals.join(", ")}`
      }
    })
  )

/** Every response says it comes from the sandbox; the scenario header is read once and seen by the whole request. */
export const SandboxMiddleware = HttpLayerRouter.middleware(
  Effect.succeed((app) =>
    Effect.gen(function* () {
      yield* HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeader(response, SANDBOX_HEADER, "true")))
      const request = yield* HttpServerRequest.HttpServerRequest
      const raw = request.headers[SCENARIO_HEADER]
      if (raw === undefined) return yield* app
      const scenario = Schema.decodeUnknownEither(Scenario)(raw.trim())
      if (Either.isLeft(scenario)) return unknownScenario(raw)
      return yield* Effect.provideService(app, CurrentScenario, Option.some(scenario.right))
    })
  ),
  { global: true }
)

/** no_food, analysis_failed and analysis_timeout happen in the model: no food seen, a failing provider, no answer before the deadline. */
export const withScenarioVision = <E, R>(model: Layer.Layer<VisionModel, E, R>) =>
  Layer.effect(
    VisionModel,
    Effect.map(VisionModel, (inner) =>
      VisionModel.of({
        model: inner.model,
        analyze: (input) =>
          Effect.flatMap(CurrentScenario, (scenario) => {
            if (Option.isNone(scenario)) return inner.analyze(input)
            switch (scenario.value) {
              case "no_food":
                return Effect.succeed(NO_FOOD)
              case "analysis_failed":
                return Effect.fail(new VisionFailure({ reason: "provider_error", message: "the sandbox's vision model failed (Sandbox-Scenario: analysis_failed)" }))
              case "analysis_timeout":
                return Effect.never
              default:
                return inner.analyze(input)
            }
          })
      })
    )
  ).pipe(Layer.provide(model))

const limitReached = new TooManyRequests({
  error: { code: "rate_limited", message: "The sandbox simulated a reached rate limit (Sandbox-Scenario: rate_limited)." }
})

/** rate_limited happens where limits are checked: after validation and idempotency, before anything is reserved. */
export const withScenarioLimits = <E, R>(limits: Layer.Layer<Limits, E, R>) =>
  Layer.effect(
    Limits,
    Effect.map(Limits, (inner) =>
      Limits.of({
        admit: (payer, requestId) => Effect.flatMap(is("rate_limited"), (hit) => (hit ? Effect.fail(limitReached) : inner.admit(payer, requestId))),
        // A request that names the scenario is admitted (or not) by `admit` above, after its claim.
        inClaim: (payer) => Effect.flatMap(is("rate_limited"), (hit) => (hit ? Effect.succeedNone : inner.inClaim(payer))),
        peek: Effect.flatMap(is("rate_limited"), (hit) => (hit ? Effect.fail(limitReached) : inner.peek)),
        // Requests that name a scenario are never answered from this view (the fast lane leaves them to the stack).
        openAt: inner.openAt
      })
    )
  ).pipe(Layer.provide(limits))

const creditsCannotPend = new InvalidRequest({
  error: {
    code: "invalid_request",
    message: "Sandbox-Scenario payment_pending applies to x402 payments (PAYMENT-SIGNATURE); a credit key is never pending"
  }
})

/**
 * payment_pending happens on the chain: the payment's first settlement stays unconfirmed, so the server answers
 * 503 payment_pending; the identical retry sends it again and it settles.
 */
export const withScenarioPayments = <E, R>(funding: Layer.Layer<Funding, E, R>) =>
  Layer.effect(
    Funding,
    Effect.gen(function* () {
      const inner = yield* Funding
      const chain = yield* MemoryChain
      return Funding.of({
        ...inner,
        identify: (credential) =>
          Effect.gen(function* () {
            if (!(yield* is("payment_pending"))) return yield* inner.identify(credential)
            if (credential._tag === "Bearer") return yield* creditsCannotPend
            const payment = Either.getRight(readPayment(credential.payment))
            if (Option.isSome(payment)) yield* chain.holdFirstSettlement(payment.value.authorization.from, payment.value.authorization.nonce)
            return yield* inner.identify(credential)
          })
      })
    })
  ).pipe(Layer.provide(funding))
