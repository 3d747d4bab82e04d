/** The one composition of the service: routes, middleware, features and infrastructure. */
import { createServer } from "node:http"
import { HttpApiScalar, HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { AnalyzerLive } from "./analysis/Analyzer.ts"
import { AnalysisHttpLive } from "./analysis/http.ts"
import { RequestStoreLive } from "./analysis/RequestStore.ts"
import { VisionModelLive } from "./analysis/VisionModelLive.ts"
import { AppConfig } from "./config.ts"
import * as Database from "./db/Database.ts"
import { FoodDb } from "./foods/FoodDb.ts"
import { MorselApi } from "./http/Api.ts"
import { HealthHttpLive } from "./http/health.ts"
import { errorResponse, TransportGuard } from "./http/transport.ts"
import { CreditKeyAuthUnavailable, CreditsUnavailableLive, FundingUnavailable } from "./http/unavailable.ts"
import { Limits } from "./limits/Limits.ts"

const ApiRoutes = HttpLayerRouter.addHttpApi(MorselApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([HealthHttpLive, AnalysisHttpLive, CreditsUnavailableLive]),
  Layer.provide(CreditKeyAuthUnavailable)
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

/** Every route behind the transport guard; needs the feature services below. */
export const Routes = Layer.mergeAll(ApiRoutes, DocsRoute, NotFoundRoute).pipe(Layer.provide(TransportGuard))

/** The analysis pipeline on top of its outside dependencies (vision model, food database, funding, limits). */
export const AnalysisServices = Layer.mergeAll(AnalyzerLive, RequestStoreLive)

/** The outside dependencies as they run in production. */
const FoodDbLive = Layer.succeed(FoodDb, { matcherVersion: "none", match: () => Effect.succeedNone })

export const LiveDependencies = Layer.mergeAll(VisionModelLive, FoodDbLive, FundingUnavailable, Limits.unlimited)

/** Serves Routes with the given services on an HTTP server layer. */
export const serveWith = <E, R>(services: Layer.Layer<Layer.Layer.Success<typeof AnalysisServices> | Layer.Layer.Success<typeof LiveDependencies>, E, R>) =>
  HttpLayerRouter.serve(Routes, { disableListenLog: true }).pipe(Layer.provide(services))

/** The production server: settings from the environment, the configured database, a real port. */
export const ServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (settings) =>
    serveWith(AnalysisServices.pipe(Layer.provideMerge(LiveDependencies))).pipe(
      Layer.provide(NodeHttpServer.layer(createServer, { host: settings.host, port: settings.port })),
      Layer.provide(Database.layer),
      Layer.tap(() => Effect.logInfo(`morsel listening on http://${settings.host}:${settings.port}`))
    )
  )
).pipe(Layer.provide(AppConfig.layer))

export { errorResponse }
