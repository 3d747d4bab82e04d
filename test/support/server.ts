/** Starts the whole HTTP service on a random 127.0.0.1 port, on a fresh test database. */
import { createServer } from "node:http"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import type { SqlClient } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, type Scope } from "effect"
import { type AppConfig, AppConfigFromEnv } from "../../src/config.ts"
import { nodeServer } from "../../src/http/nodeServer.ts"
import { LoggingLive } from "../../src/logging.ts"
import { type Dependencies, type FeatureOutput, serveWith } from "../../src/server.ts"
import type { PaymentStore } from "../../src/x402/PaymentStore.ts"
import type { ChainServices } from "../../src/x402/X402Funding.ts"
import { TestDatabase } from "./database.ts"

export interface TestServer {
  readonly url: string
}

/** Settings every test server gets unless the test overrides them. */
export const baseEnv: Readonly<Record<string, string>> = {
  HOST: "127.0.0.1",
  PORT: "0",
  LOG_LEVEL: "warning",
  LOG_FORMAT: "pretty"
}

/** Dependencies built by the test itself (`Layer.succeedContext`) stay inspectable by the test. */
export const startServer = (options: {
  readonly env?: Readonly<Record<string, string>>
  readonly dependencies: Layer.Layer<
    Dependencies,
    unknown,
    AppConfig | SqlClient.SqlClient | PgClient.PgClient | FeatureOutput
  >
  /** The x402 chain seam, e.g. ChainMemory on the test's MemoryChain; default: the one the settings choose. */
  readonly chain?: Layer.Layer<ChainServices, never, AppConfig | PaymentStore>
  /** A database already built by the test (to share it between servers or inspect it); default: a fresh one. */
  readonly database?: Layer.Layer<SqlClient.SqlClient | PgClient.PgClient>
  /** Every request through the HttpApi stack: the service on a plain Node server, without the fast lane. */
  readonly withoutFastLane?: boolean
}): Effect.Effect<TestServer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const config = AppConfigFromEnv({ ...baseEnv, ...options.env }).pipe(Layer.orDie)
    // One layer for all four dependencies: it is built once, whichever part asks for it.
    const dependencies = options.dependencies
    const app = serveWith({
      vision: dependencies,
      foods: dependencies,
      limits: dependencies,
      funding: dependencies,
      ...(options.chain === undefined ? {} : { chain: options.chain }),
      database: options.database ?? TestDatabase,
      http: options.withoutFastLane ? NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 }) : nodeServer({ host: "127.0.0.1", port: 0 })
    }).pipe(
      Layer.provide(LoggingLive),
      Layer.provide(config),
      Layer.orDie
    )
    const context = yield* Layer.build(app)
    const server = Context.get(context, HttpServer.HttpServer)
    const address = server.address
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("test server is not on TCP")
    return {
      url: `http://127.0.0.1:${address.port}`
    }
  })

/** The running server of a test file, shared by its tests through `it.layer`. */
export class Server extends Context.Tag("test/Server")<Server, TestServer>() {}

export const serverLayer = (options: Parameters<typeof startServer>[0]) => Layer.scoped(Server, startServer(options))
