/** The `morsel` command line: serve, migrate, and key generation. */
import { randomBytes } from "node:crypto"
import { Command, Options } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer } from "effect"
import { AppConfig } from "./config.ts"
import * as Database from "./db/Database.ts"
import { SERVICE_VERSION } from "./http/health.ts"
import { LoggingLive } from "./logging.ts"
import { fooddbCommand } from "./foods/cli.ts"
import { ServerLive } from "./server.ts"

const serve = Command.make("serve", {}, () => Layer.launch(ServerLive)).pipe(
  Command.withDescription("Serve the REST API, the docs and the tool interface (migrations applied first)")
)

const migrate = Command.make("migrate", {}, () =>
  Effect.gen(function* () {
    yield* Console.log("migrations applied")
  }).pipe(Effect.provide(Database.layer), Effect.provide(AppConfig.layer))
).pipe(Command.withDescription("Apply database migrations and exit"))

const keyNew = Command.make(
  "new",
  { test: Options.boolean("test").pipe(Options.withDescription("a morsel_test_ key for a server in Stripe test mode")) },
  ({ test }) => Console.log(`morsel_${test ? "test" : "live"}_${randomBytes(32).toString("hex")}`)
).pipe(Command.withDescription("Generate a new credit API key (kept by you; the server learns it at your first checkout)"))

const key = Command.make("key").pipe(Command.withSubcommands([keyNew]), Command.withDescription("Credit API keys"))

const fooddb = fooddbCommand.pipe(Command.provide(Database.layer.pipe(Layer.provide(AppConfig.layer))))

export const morsel = Command.make("morsel").pipe(Command.withSubcommands([serve, migrate, key, fooddb]))

const run = Command.run(morsel, { name: "morsel", version: SERVICE_VERSION })

/** A bad setting is reported by the command that reads the settings, not by the logger. */
const logging = LoggingLive.pipe(Layer.provide(AppConfig.layer), Layer.orElse(() => Layer.empty))

run(process.argv).pipe(Effect.provide(NodeContext.layer), Effect.provide(logging), NodeRuntime.runMain({ disablePrettyLogger: true }))
