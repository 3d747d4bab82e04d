/** The one composition of the service: routes, middleware, features and infrastructure. */
import { HttpApiScalar, HttpLayerRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer } from "effect"
import { AdminRoute } from "./admin/AdminRoute.ts"
import { AnalyzerLive } from "./analysis/Analyzer.ts"
import type { Funding } from "./analysis/Funding.ts"
import { FundingRouterLive } from "./analysis/FundingRouter.ts"
import { AnalysisHttpLive, AnalyzeRequestsLive } from "./analysis/http.ts"
import { RequestStore, RequestStoreLive } from "./analysis/RequestStore.ts"
import { StaleAttemptSweeperLive } from "./analysis/sweeper.ts"
import type { VisionModel } from "./analysis/VisionModel.ts"
import { VisionModelLive } from "./analysis/VisionModelLive.ts"
import { AppConfig } from "./config.ts"
import { CreditFunding, CreditsApiLive, CreditsRoutes, CreditsServicesLive } from "./credits/layer.ts"
import * as Database from "./db/Database.ts"
import type { FoodDb } from "./foods/FoodDb.ts"
import { FoodDbLive } from "./foods/FoodDbLive.ts"
import { MorselApi } from "./http/Api.ts"
import { HealthHttpLive } from "./http/health.ts"
import { createServerAnsweringUntilReady } from "./http/nodeServer.ts"
import { TransportGuard } from "./http/transport.ts"
import { type Limits, LimitsLive } from "./limits/Limits.ts"
import { McpRoute } from "./mcp/McpRoute.ts"
import { announce } from "./observability/banner.ts"
import { MetricsRoutes } from "./observability/metrics.ts"
import { TracingLive } from "./observability/tracing.ts"
import { WebRoute } from "./web/WebRoute.ts"
import { PaymentResolutions } from "./x402/Reconciler.ts"
import { type ChainServices, X402Funding, X402Layer } from "./x402/X402Funding.ts"

const ApiRoutes = HttpLayerRouter.addHttpApi(MorselApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([HealthHttpLive, AnalysisHttpLive, CreditsApiLive])
)

const DocsRoute = HttpApiScalar.layerHttpLayerRouter({ api: MorselApi, path: "/docs" })

const NotFoundRoute = HttpLayerRouter.add("*", "*", (request) =>
  Effect.succeed(
    HttpServerResponse.unsafeJson(
      { _tag: "NotFound", error: { code: "not_found", message: `no route for ${request.method} ${request.url.split("?")[0]}` } },
      { status: 404 }
    )
  )
)

/** Every route behind the transport guard. */
export const Routes = Layer.mergeAll(ApiRoutes, CreditsRoutes, McpRoute, AdminRoute, DocsRoute, WebRoute, MetricsRoutes, NotFoundRoute).pipe(
  Layer.provide(TransportGuard)
)

/** The outside dependencies of the analysis, replaceable in tests. */
export type Dependencies = VisionModel | FoodDb | Funding | Limits

/** Payments the x402 reconciler settles or fails in the background update their analysis requests. */
const PaymentResolutionsLive = Layer.effect(
  PaymentResolutions,
  Effect.map(RequestStore, (store) =>
    PaymentResolutions.of({
      settled: (requestId, paymentResponse) =>
        store.settlePending(requestId, paymentResponse).pipe(Effect.catchAll((error) => Effect.logError("saving a settled payment failed", error))),
      failed: (requestId) =>
        store.fail(requestId, "payment_failed", false).pipe(Effect.catchAll((error) => Effect.logError("saving a failed payment failed", error)))
    })
  )
)

/**
 * The features' own services on PostgreSQL, x402 on the given chain seam (the one the settings choose by default,
 * `ChainMemory` for the sandbox and tests); needs AppConfig, SqlClient and RequestStore.
 */
export const FeatureServicesOn = <E = never, R = never>(chain?: Layer.Layer<ChainServices, E, R>) =>
  Layer.merge(CreditsServicesLive, X402Layer({}, chain).pipe(Layer.provide(PaymentResolutionsLive)))

export const FeatureServices = FeatureServicesOn()

/** Card credits for a Bearer key, x402 for a PAYMENT-SIGNATURE. */
export const FundingLive = FundingRouterLive(
  Effect.gen(function* () {
    const credit = yield* CreditFunding
    const x402 = yield* X402Funding
    return {
      credit,
      x402: {
        identify: x402.identify,
        abandon: x402.release,
        // A claim is released with its attempt; what was submitted is the reconciler's.
        releaseOrphans: () => Effect.void,
        challenge: x402.challenge,
        challengeWith: x402.challengeWith
      }
    }
  })
)

/** The outside dependencies as they run in production. */
export const LiveDependencies = Layer.mergeAll(VisionModelLive, FoodDbLive, FundingLive, LimitsLive)

/**
 * Serves Routes with the analysis pipeline on the given dependencies and chain seam (the settings' choice by
 * default); needs AppConfig, the database and an HTTP server.
 */
export const serveWith = <E, R, EC = never, RC = never>(dependencies: Layer.Layer<Dependencies, E, R>, chain?: Layer.Layer<ChainServices, EC, RC>) =>
  Layer.merge(HttpLayerRouter.serve(Routes, { disableListenLog: true }), StaleAttemptSweeperLive).pipe(
    Layer.provide(AnalyzeRequestsLive),
    Layer.provide(AnalyzerLive),
    Layer.provide(dependencies),
    Layer.provide(FeatureServicesOn(chain)),
    Layer.provide(RequestStoreLive),
    Layer.provide(TracingLive)
  )

/** The production server: settings from the environment, the configured database, a real port. */
export const ServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (settings) =>
    serveWith(LiveDependencies).pipe(
      Layer.provideMerge(NodeHttpServer.layer(createServerAnsweringUntilReady, { host: settings.host, port: settings.port })),
      Layer.provideMerge(Database.layer),
      Layer.tap((context) => announce(settings, HttpServer.formatAddress(Context.get(context, HttpServer.HttpServer).address)).pipe(Effect.provide(context)))
    )
  )
).pipe(Layer.provide(AppConfig.layer))
