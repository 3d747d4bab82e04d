/**
 * The sandbox: the whole service on in-memory substitutes of every outside dependency (scripted vision model,
 * in-memory card processor with its own checkout page, memory chain with 100 USDC per wallet, in-memory
 * database with a shipped USDA subset). Needs no setting and charges nothing real.
 */
import { Console, Effect, Layer, Option } from "effect"
import { VisionModelLive } from "../analysis/VisionModelLive.ts"
import { VisionModelScripted } from "../analysis/VisionModelScripted.ts"
import { AppConfig, AppConfigFromEnv, type Settings } from "../config.ts"
import { ProcessorMemory } from "../credits/ProcessorMemory.ts"
import { SandboxCheckoutLive, SandboxCheckoutRoutes } from "../credits/sandbox.ts"
import * as Database from "../db/Database.ts"
import { storeFoods } from "../foods/core/shipped.ts"
import { FoodDb } from "../foods/core/FoodDb.ts"
import { makeFoodDbLive } from "../foods/core/FoodDbLive.ts"
import { loadRecords } from "../foods/core/repository.ts"
import { LimitsLive } from "../limits/Limits.ts"
import { nodeServer } from "../http/nodeServer.ts"
import { FundingLive, serveWith } from "../server.ts"
import { ChainMemory } from "../x402/ChainMemory.ts"
import { MemoryChainLive } from "../x402/MemoryChain.ts"
import { WalletsRoute } from "../x402/WalletsRoute.ts"
import { SandboxMode } from "../sandboxMode.ts"
import { SANDBOX_HEADER, SandboxMiddleware, Scenario, withScenarioLimits, withScenarioPayments, withScenarioVision } from "./scenario.ts"

/** The sandbox's seller: x402 payments go to this address on the memory chain. */
export const SANDBOX_PAY_TO = "0x5a4db0c55a4db0c55a4db0c55a4db0c55a4db0c5"

/** What the sandbox reads from the environment: where it listens, who runs it, how it logs, deadlines, limits and an own vision model. */
const KEPT =
  /^(HOST|PORT|PUBLIC_BASE_URL|TRUSTED_ORIGINS|TRUSTED_PROXIES|ADMIN_TOKEN|OPERATOR_NAME|SUPPORT_CONTACT|TERMS_URL|PRIVACY_URL|LOG_LEVEL|LOG_FORMAT|METRICS|OTEL_EXPORTER_OTLP_ENDPOINT|ANALYSIS_TIMEOUT_MS|X402_CONFIRM_TIMEOUT_MS|LIMIT_[A-Z_]+|OPENAI_API_KEY|OPENAI_BASE_URL|VISION_MODEL)$/

const GENEROUS = "100000"

/** Quick deadlines (the scripted model answers at once) and limits an integrator's test suite does not reach. */
const DEFAULTS: Readonly<Record<string, string>> = {
  LOG_FORMAT: "pretty",
  ANALYSIS_TIMEOUT_MS: "3000",
  X402_CONFIRM_TIMEOUT_MS: "1000",
  LIMIT_GLOBAL_PER_DAY: GENEROUS,
  LIMIT_GLOBAL_PER_HOUR: GENEROUS,
  LIMIT_PAYER_PER_DAY: GENEROUS,
  LIMIT_CONCURRENT: "50",
  LIMIT_X402_PER_DAY: GENEROUS,
  LIMIT_X402_PER_HOUR: GENEROUS,
  LIMIT_X402_CONCURRENT: "50",
  LIMIT_FAILURES_PER_DAY: GENEROUS
}

/** The sandbox's settings variables: the kept ones of `env` over the defaults; x402 pays the sandbox seller in Base USDC. */
export const sandboxEnv = (env: Readonly<Record<string, string | undefined>>): Record<string, string> => {
  const kept = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => KEPT.test(entry[0]) && entry[1] !== undefined && entry[1] !== ""))
  // A real model takes seconds: with one, the production deadline unless one is given.
  const deadline: Record<string, string> = kept["OPENAI_API_KEY"] === undefined ? {} : { ANALYSIS_TIMEOUT_MS: "45000" }
  return { ...DEFAULTS, ...deadline, ...kept, MORSEL_DATA_DIR: "memory://", X402_PAY_TO: SANDBOX_PAY_TO }
}

/** The sandbox's settings: in test mode (keys `morsel_test_…`, sessions `cs_test_…`). */
export const sandboxConfig = (env: Readonly<Record<string, string | undefined>>) =>
  Layer.effect(
    AppConfig,
    Effect.map(AppConfig, (settings): Settings => ({ ...settings, testMode: true }))
  ).pipe(Layer.provide(AppConfigFromEnv(sandboxEnv(env))))

/** Foods imported with `fooddb import` into an embedded database folder (read once; the folder must not be in use). */
const importedFoods = (dataDir: string) =>
  Effect.scoped(Effect.flatMap(Database.embedded(dataDir, { serving: true }), (target) => loadRecords().pipe(Effect.provide(Database.layerFor(target)))))

/** The sandbox's food database: the foods imported in `dataDir` when it holds some, else the shipped copy of SR28 (as a server's first start). */
const sandboxFoods = (dataDir: Option.Option<string>) =>
  makeFoodDbLive({ shipped: true }).pipe(
    Layer.provide(
      Layer.effectDiscard(
        Effect.gen(function* () {
          const imported = Option.isSome(dataDir) ? yield* importedFoods(dataDir.value) : []
          if (imported.length === 0) return
          const stored = yield* storeFoods(imported, dataDir.pipe(Option.getOrElse(() => "")))
          yield* Effect.logInfo("sandbox foods loaded").pipe(Effect.annotateLogs({ foods: stored }))
        })
      )
    )
  )

/** The same food database, started only once its index is built (a server builds it while it already answers). */
const withIndexBuilt = <E, R>(foods: Layer.Layer<FoodDb, E, R>) =>
  Layer.effectDiscard(Effect.flatMap(FoodDb, (db) => db.reader)).pipe(Layer.provideMerge(foods))

/**
 * The sandbox's outside world, each part the in-memory substitute of a live one (the memory chain is shared by its
 * users); with `ownModel`, the vision model of the settings (OPENAI_API_KEY, …) instead of the scripted one; with
 * `indexBuilt`, started once its food index is built, so that a first analysis does not spend its deadline (3 s)
 * waiting for it on a busy machine.
 */
export const sandboxParts = (options: { readonly foodsFrom?: string; readonly ownModel?: boolean; readonly indexBuilt?: boolean } = {}) => {
  const chain = MemoryChainLive
  const foods = sandboxFoods(Option.fromNullable(options.foodsFrom))
  return {
    vision: withScenarioVision(options.ownModel === true ? VisionModelLive : VisionModelScripted),
    foods: options.indexBuilt === true ? withIndexBuilt(foods) : foods,
    limits: withScenarioLimits(LimitsLive),
    funding: withScenarioPayments(FundingLive).pipe(Layer.provide(chain)),
    processor: ProcessorMemory,
    chain: ChainMemory.pipe(Layer.provide(chain)),
    database: Database.servingLayer,
    routes: Layer.mergeAll(SandboxMiddleware, SandboxCheckoutRoutes, WalletsRoute),
    routeServices: Layer.merge(SandboxCheckoutLive.pipe(Layer.provideMerge(ProcessorMemory)), chain)
  }
}

const DEFAULT_URL = "http://127.0.0.1:8787"

/** What the sandbox says at start: that it is the sandbox, and what it simulates. */
export const banner = (settings: Settings, url: string, foodsFrom: Option.Option<string>) =>
  [
    `morsel SANDBOX on ${url}: every outside service is simulated and nothing is charged.`,
    Option.match(settings.openai.apiKey, {
      onNone: () => `  vision model  scripted: the same photo always gives the same meal ("model": "sandbox"), in en or lt`,
      onSome: () =>
        `  vision model  yours: ${settings.openai.model} at ${Option.getOrElse(settings.openai.baseUrl, () => "OpenAI")} (OPENAI_API_KEY is set); payments stay simulated`
    }),
    `  foods         ${Option.match(foodsFrom, { onNone: () => "USDA SR28 (shipped copy), 8,789 foods", onSome: (dir) => `the foods imported in ${dir} (else USDA SR28, shipped copy)` })}`,
    `  card credits  in-memory card processor: keys morsel_test_…, sessions cs_test_…, paid on ${url}/sandbox/checkout/{session_id}`,
    `  x402          in-memory Base USDC (eip155:8453): every wallet starts with 100 USDC; balance at ${url}/sandbox/wallets/{address}`,
    `  database      a new one of its own, in the temporary directory: everything is gone when the sandbox stops`,
    `  scenarios     header Sandbox-Scenario: ${Scenario.literals.join(" | ")}`,
    `  timeouts      analysis ${settings.analysisTimeoutMs} ms, payment confirmation ${settings.x402.confirmTimeoutMs} ms`,
    `Try it: npx morsel analyze <photo> --wallet-key 0x$(openssl rand -hex 32)${url === DEFAULT_URL ? "" : ` --base-url ${url}`} (every wallet holds 100 sandbox USDC), or open ${url}/`
  ].join("\n")

/** The sandbox server on HOST:PORT (settings from `env`, default the process environment), printing its banner once listening. */
export const SandboxLive = (env: Readonly<Record<string, string | undefined>> = process.env, options: { readonly banner?: boolean; readonly indexBuilt?: boolean } = {}) => {
  const foodsFrom = Option.fromNullable(env["MORSEL_DATA_DIR"]).pipe(Option.filter((dir) => dir !== "" && dir !== "memory://"))
  return Layer.unwrapEffect(
    Effect.map(AppConfig, (settings) =>
      serveWith({
        ...sandboxParts({ ...(Option.isSome(foodsFrom) ? { foodsFrom: foodsFrom.value } : {}), ownModel: Option.isSome(settings.openai.apiKey), indexBuilt: options.indexBuilt === true }),
        http: nodeServer({ host: settings.host, port: settings.port, stamp: { [SANDBOX_HEADER]: "true" } })
      }).pipe(Layer.tap(() => (options.banner === false ? Effect.void : Console.log(banner(settings, settings.publicBaseUrl, foodsFrom)))))
    )
  ).pipe(Layer.provide(Layer.succeed(SandboxMode, true)), Layer.provide(sandboxConfig(env)))
}
