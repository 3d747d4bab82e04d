/** The one composition of the service: routes, middleware, features and infrastructure. */
import { type Etag, HttpLayerRouter, type HttpPlatform, HttpServer, HttpServerResponse } from "@effect/platform"
import type { NodeContext } from "@effect/platform-node"
import type { SqlClient } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { AdminRoute } from "./admin/AdminRoute.ts"
import { AnalyzerLive } from "./analysis/Analyzer.ts"
import { AnalyzeRequestsLive } from "./analysis/AnalyzeRequests.ts"
import { Funding, fundingOf } from "./analysis/Funding.ts"
import { AnalysisHttpLive } from "./analysis/http.ts"
import { RequestStore, RequestStoreLive } from "./analysis/RequestStore.ts"
import { StaleAttemptSweeperLive } from "./analysis/sweeper.ts"
import type { VisionModel } from "./analysis/VisionModel.ts"
import { VisionModelLive } from "./analysis/VisionModelLive.ts"
import { AppConfig, AppConfigLive } from "./config.ts"
import { CreditFunding, CreditsApiLive, CreditsRoutes, CreditsServicesWith } from "./credits/layer.ts"
import type { Processor } from "./credits/Processor.ts"
import { ProcessorLive } from "./credits/ProcessorStripe.ts"
import * as Database from "./db/Database.ts"
import { SharedClockLive } from "./db/sharedClock.ts"
import { FoodDb } from "./foods/core/FoodDb.ts"
import { FoodDbLive } from "./foods/core/FoodDbLive.ts"
import { FoodsHttpLive } from "./foods/faces/http.ts"
import { FoodsLaneLive } from "./foods/faces/lane.ts"
import { MorselApi } from "./http/Api.ts"
import { DocsRoute } from "./http/docs.ts"
import { HealthHttpLive } from "./http/health.ts"
import { FastLaneLive, ReplayCacheLive } from "./http/fastLane.ts"
import { nodeServer } from "./http/nodeServer.ts"
import { TransportGuard } from "./http/transport.ts"
import { type Limits, LimitsLive } from "./limits/Limits.ts"
import { FoodLimitsLive } from "./limits/FoodLimits.ts"
import { McpRoute } from "./mcp/McpRoute.ts"
import { collectStartGarbage } from "./memory.ts"
import { announce } from "./observability/banner.ts"
import { MetricsRoutes } from "./observability/metrics.ts"
import { requestLog } from "./observability/requestLog.ts"
import { TracingLive } from "./observability/tracing.ts"
import { WebRoute } from "./web/WebRoute.ts"
import { PaymentResolutions } from "./x402/Reconciler.ts"
import { type ChainServices, X402Funding, X402Layer } from "./x402/X402Funding.ts"

const ApiRoutes = HttpLayerRouter.addHttpApi(MorselApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([HealthHttpLive, AnalysisHttpLive, CreditsApiLive, FoodsHttpLive])
)

const NotFoundRoute = HttpLayerRouter.add("*", "*", (request) =>
  Effect.succeed(
    HttpServerResponse.unsafeJson(
      { _tag: "NotFound", error: { code: "not_found", message: `no route for ${request.method} ${request.url.split("?")[0]}` } },
      { status: 404 }
    )
  )
)

/** The service's own routes, plus any a composition adds (the sandbox's pages and middleware), behind the transport guard. */
export const routesWith = <E, R>(extra: Layer.Layer<never, E, R>) =>
  Layer.mergeAll(ApiRoutes, CreditsRoutes, McpRoute, AdminRoute, DocsRoute, WebRoute, MetricsRoutes, NotFoundRoute, extra).pipe(
    Layer.provide(TransportGuard)
  )

/** Every route behind the transport guard. */
export const Routes = routesWith(Layer.empty)

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

/** The features' own services on PostgreSQL, on the given card processor and chain; needs AppConfig, SqlClient and RequestStore. */
export const featureServices = <EP = never, RP = never, EC = never, RC = never>(
  processor?: Layer.Layer<Processor, EP, RP>,
  chain?: Layer.Layer<ChainServices, EC, RC>
) => {
  const cards: Layer.Layer<Processor, EP, RP | AppConfig> = processor ?? ProcessorLive
  // x402 reads the processor (the same layer, built once) only to say whether credits are sold when it is off.
  return Layer.merge(CreditsServicesWith(cards), X402Layer({}, chain).pipe(Layer.provide(PaymentResolutionsLive), Layer.provide(cards)))
}

/** The features as the settings choose them (Stripe or no card processor; a Base chain or no x402). */
export const FeatureServices = featureServices()

/** Card credits for a Bearer key, x402 for a payment. */
export const FundingLive = Layer.effect(Funding, Effect.map(Effect.all({ credit: CreditFunding, x402: X402Funding }), fundingOf))

/** The outside dependencies as they run in production. */
export const LiveDependencies = Layer.mergeAll(VisionModelLive, FoodDbLive, FundingLive, LimitsLive)

/** What the features provide to the dependencies (FundingLive reads the credits and x402 services). */
export type FeatureOutput = Layer.Layer.Success<typeof FeatureServices>

/** A layer giving A, whatever it needs and however it fails (the composition adds those up). */
type Part<A> = Layer.Layer<A, unknown, unknown>

/** Layers a service is composed of: each outside dependency is a live layer or an in-memory substitute. */
export interface Parts {
  /** The vision model: VisionModelLive, or VisionModelScripted. */
  readonly vision: Part<VisionModel>
  /** Food matching: FoodDbLive, FoodDbMemory(records) or FoodDbEmpty. */
  readonly foods: Part<FoodDb>
  /** Admission limits: LimitsLive, or LimitsUnlimited. */
  readonly limits: Part<Limits>
  /** The card processor: by default as the settings say (Stripe or Disabled); ProcessorMemory in the sandbox. */
  readonly processor?: Part<Processor>
  /** The chain x402 verifies and settles on: by default as the settings say; ChainMemory in the sandbox. */
  readonly chain?: Part<ChainServices>
  /** How analyses are paid; FundingLive (card credits and x402 from the features) unless a test brings its own. */
  readonly funding?: Part<Funding>
  /** PostgreSQL: Database.layer (DATABASE_URL, an embedded folder or `memory://`), or a test database. */
  readonly database: Part<SqlClient.SqlClient | PgClient.PgClient>
  /** Where to listen: nodeServer(…) (with the fast lane), or any NodeHttpServer.layer(…). */
  readonly http: Part<HttpServer.HttpServer | HttpPlatform.HttpPlatform | Etag.Generator | NodeContext.NodeContext>
  /** Routes and global middleware beyond the service's own (the sandbox's). */
  readonly routes?: Layer.Layer<never, unknown, unknown>
  /** Services those routes use (any output: the type of the given layer is kept). */
  readonly routeServices?: Layer.Layer<never, unknown, unknown>
}

type ErrorOf<L> = L extends Layer.Layer<infer _A, infer E, infer _R> ? E : never
type NeedsOf<L> = L extends Layer.Layer<infer _A, infer _E, infer R> ? R : never
/** Inside `serveWith` a part has only its declared type; this restores the caller's own (what it fails with and needs). */
type Exact<L, A> = Layer.Layer<A, ErrorOf<L>, NeedsOf<L>>

/** Serves Routes with the analysis pipeline on the given dependencies and features; needs AppConfig, the database and an HTTP server. */
export const serveDependencies = <E, R, EF = never, RF = never, ER = never, RR = never, AS = never, ES = never, RS = never>(
  dependencies: Layer.Layer<Dependencies, E, R>,
  features: Layer.Layer<FeatureOutput, EF, RF>,
  routes: Layer.Layer<never, ER, RR>,
  routeServices: Layer.Layer<AS, ES, RS>
) =>
  Layer.mergeAll(HttpLayerRouter.serve(routesWith(routes), { disableListenLog: true, disableLogger: true, middleware: requestLog }), FastLaneLive, FoodsLaneLive, StaleAttemptSweeperLive).pipe(
    // One count of the free food calls per instance, whichever face (REST, its lane, MCP) takes the call.
    Layer.provide(FoodLimitsLive),
    Layer.provide(ReplayCacheLive),
    Layer.provide(AnalyzeRequestsLive),
    Layer.provide(AnalyzerLive),
    Layer.provide(dependencies),
    Layer.provide(routeServices),
    Layer.provide(features),
    Layer.provide(RequestStoreLive),
    Layer.provide(TracingLive)
  )

/**
 * The one composition of the service from its parts: production, the sandbox and the tests differ only in the
 * parts they give. Needs AppConfig (and whatever the parts need beyond each other); gives the running HttpServer.
 */
export const serveWith = <const P extends Parts>(parts: P) => {
  const dependencies = Layer.mergeAll(parts.vision, parts.foods, parts.limits, parts.funding ?? FundingLive) as Exact<
    P["vision"] | P["foods"] | P["limits"] | NonNullable<P["funding"]> | typeof FundingLive,
    Dependencies
  >
  const features = featureServices(
    parts.processor as Exact<NonNullable<P["processor"]>, Processor> | undefined,
    parts.chain as Exact<NonNullable<P["chain"]>, ChainServices> | undefined
  )
  const routes = (parts.routes ?? Layer.empty) as Exact<NonNullable<P["routes"]>, never>
  const routeServices = (parts.routeServices ?? Layer.empty) as Exact<NonNullable<P["routeServices"]>, Layer.Layer.Success<NonNullable<P["routeServices"]>>>
  return serveDependencies(dependencies, features, routes, routeServices).pipe(
    Layer.provideMerge(parts.http as Exact<P["http"], Layer.Layer.Success<P["http"]>>),
    Layer.provideMerge(parts.database as Exact<P["database"], Layer.Layer.Success<P["database"]>>)
  )
}

/**
 * The food index is built while the server already answers (its start's garbage collected then, src/memory.ts):
 * once the index is ready, what building it left behind is collected and the heap compacted again, before the
 * first photos come, instead of staying under every later peak.
 */
const CompactedOnceIndexed = Layer.scopedDiscard(Effect.flatMap(FoodDb, (foods) => Effect.forkScoped(Effect.zipRight(foods.reader, collectStartGarbage))))

/** The production server: settings from the environment, the configured database, a real port. */
export const ServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (settings) =>
    serveWith({
      vision: VisionModelLive,
      foods: CompactedOnceIndexed.pipe(Layer.provideMerge(FoodDbLive)),
      limits: LimitsLive,
      // Instances on one database read the time from its clock (corrected locally), so their leases and windows agree.
      database: SharedClockLive.pipe(Layer.provideMerge(Database.servingLayer)),
      http: nodeServer({ host: settings.host, port: settings.port })
    }).pipe(
      Layer.tap((context) => announce(settings, HttpServer.formatAddress(Context.get(context, HttpServer.HttpServer).address)).pipe(Effect.provide(context)))
    )
  )
).pipe(Layer.provide(AppConfigLive))
