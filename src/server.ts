/** The one composition of the service: routes, middleware, features and infrastructure. */
import { createServer } from "node:http"
import { HttpApiScalar, HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { AnalyzerLive } from "./analysis/Analyzer.ts"
import type { Funding } from "./analysis/Funding.ts"
import { FundingRouterLive } from "./analysis/FundingRouter.ts"
import { AnalysisHttpLive, AnalyzeRequestsLive } from "./analysis/http.ts"
import { RequestStoreLive } from "./analysis/RequestStore.ts"
import type { VisionModel } from "./analysis/VisionModel.ts"
import { VisionModelLive } from "./analysis/VisionModelLive.ts"
import { AppConfig } from "./config.ts"
import { CreditFunding, CreditsApiLive, CreditsRoutes, CreditsServicesLive } from "./credits/layer.ts"
import * as Database from "./db/Database.ts"
import type { FoodDb } from "./foods/FoodDb.ts"
import { FoodDbLive } from "./foods/FoodDbLive.ts"
import { MorselApi } from "./http/Api.ts"
import { HealthHttpLive } from "./http/health.ts"
import { TransportGuard } from "./http/transport.ts"
import { x402Unavailable } from "./http/unavailable.ts"
import { Limits } from "./limits/Limits.ts"

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
export const Routes = Layer.mergeAll(ApiRoutes, CreditsRoutes, DocsRoute, NotFoundRoute).pipe(Layer.provide(TransportGuard))

/** The outside dependencies of the analysis, replaceable in tests. */
export type Dependencies = VisionModel | FoodDb | Funding | Limits

/** The features' own services on PostgreSQL; needs AppConfig and SqlClient. */
export const FeatureServices = CreditsServicesLive

const FundingLive = FundingRouterLive(
  Effect.map(CreditFunding, (credits) => ({
    credit: credits,
    x402: { identify: () => Effect.fail(x402Unavailable), abandon: () => Effect.void },
    challenge: Effect.fail(x402Unavailable)
  }))
)

/** The outside dependencies as they run in production. */
export const LiveDependencies = Layer.mergeAll(VisionModelLive, FoodDbLive, FundingLive, Limits.unlimited)

/** Serves Routes with the analysis pipeline on the given dependencies; needs AppConfig, the database and an HTTP server. */
export const serveWith = <E, R>(dependencies: Layer.Layer<Dependencies, E, R>) =>
  HttpLayerRouter.serve(Routes, { disableListenLog: true }).pipe(
    Layer.provide(AnalyzeRequestsLive),
    Layer.provide(Layer.mergeAll(AnalyzerLive, RequestStoreLive)),
    Layer.provide(dependencies),
    Layer.provide(FeatureServices)
  )

/** The production server: settings from the environment, the configured database, a real port. */
export const ServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (settings) =>
    serveWith(LiveDependencies).pipe(
      Layer.provide(NodeHttpServer.layer(createServer, { host: settings.host, port: settings.port })),
      Layer.provide(Database.layer),
      Layer.tap(() => Effect.logInfo(`morsel listening on http://${settings.host}:${settings.port}`))
    )
  )
).pipe(Layer.provide(AppConfig.layer))
