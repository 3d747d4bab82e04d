/** The `morsel` command line: serve, migrate, keys, and thin clients of a running server (analyze, credits, admin). */
import { randomBytes } from "node:crypto"
import { createServer as createNetServer } from "node:net"
import { Command, Options, ValidationError } from "@effect/cli"
import { FetchHttpClient } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, ConfigError, Console, Effect, Layer } from "effect"
import { admin } from "./cli/admin.ts"
import { analyze } from "./cli/analyze.ts"
import { CliFailure } from "./cli/client.ts"
import { credits } from "./cli/credits.ts"
import { foods, nutrition } from "./cli/foods.ts"
import { readUsage } from "./cli/usage.ts"
import { model } from "./cli/model.ts"
import { AppConfig, AppConfigFromEnv, AppConfigLive, describeConfigError } from "./config.ts"
import * as Database from "./db/Database.ts"
import { LoggingLive, StderrLogging } from "./logging.ts"
import { collectStartGarbage } from "./memory.ts"
import { withTerminalConsole } from "./terminal.ts"
import { fooddbCommand } from "./foods/faces/cli.ts"
import { SERVICE_VERSION } from "./version.ts"

/** A port another program holds is reported at once, before the database and the rest start (sandbox or not). */
const ensurePortFree = Effect.gen(function* () {
  const { host, port } = yield* AppConfig
  if (port === 0) return
  const free = yield* Effect.async<boolean>((resume) => {
    const probe = createNetServer()
    probe.once("error", () => resume(Effect.succeed(false)))
    probe.listen(port, host, () => probe.close(() => resume(Effect.succeed(true))))
  })
  if (!free) yield* new CliFailure({ message: `port ${port} on ${host} is already in use: stop the other server or set PORT` })
})

// Loaded on demand: the client commands start quickly without the whole service.
const serve = Command.make(
  "serve",
  {
    sandbox: Options.boolean("sandbox").pipe(
      Options.withDescription("every outside service simulated in memory: no settings, nothing charged")
    )
  },
  ({ sandbox }) =>
    sandbox
      ? Effect.flatMap(Effect.promise(() => import("./sandbox/Sandbox.ts")), ({ SandboxLive, sandboxConfig }) =>
          ensurePortFree.pipe(Effect.provide(sandboxConfig(process.env)), Effect.zipRight(Layer.launch(SandboxLive().pipe(Layer.tap(() => collectStartGarbage)))))
        )
      : ensurePortFree.pipe(
          Effect.provide(AppConfigLive),
          Effect.zipRight(Effect.promise(() => import("./server.ts"))),
          Effect.flatMap(({ ServerLive }) => Layer.launch(ServerLive.pipe(Layer.tap(() => collectStartGarbage))))
        )
).pipe(
  Command.withDescription("Serve the API, its docs and the tool interface; --sandbox for the offline sandbox")
)

const migrate = Command.make("migrate", {}, () =>
  Effect.gen(function* () {
    yield* Console.log("migrations applied")
  }).pipe(Effect.provide(Database.layer), Effect.provide(AppConfigLive))
).pipe(Command.withDescription("Apply database migrations and exit"))

const keyNew = Command.make(
  "new",
  { test: Options.boolean("test").pipe(Options.withDescription("a morsel_test_ key for a server in Stripe test mode")) },
  ({ test }) => Console.log(`morsel_${test ? "test" : "live"}_${randomBytes(32).toString("hex")}`)
).pipe(Command.withDescription("Generate a new credit API key (kept by you; the server learns it at your first checkout)"))

const key = Command.make("key").pipe(Command.withSubcommands([keyNew]), Command.withDescription("Credit API keys"))

const fooddb = fooddbCommand.pipe(Command.provide(Database.layer.pipe(Layer.provide(AppConfigLive))))

/** The process environment without unset variables. */
const definedEnv = () => Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined))

export const morsel = Command.make("morsel").pipe(
  Command.withSubcommands([serve, migrate, key, fooddb, analyze, credits, foods, nutrition, admin, model]),
  Command.withDescription("food-photo nutrition estimates, paid per call over x402 or with prepaid card credits")
)

const run = Command.run(morsel, { name: "morsel", version: SERVICE_VERSION })

/** A bad setting is reported by the command that reads the settings, not by the logger; the sandbox logs readable lines by default. */
const logging = LoggingLive.pipe(
  Layer.provide(process.argv.includes("--sandbox") ? AppConfigFromEnv({ LOG_FORMAT: "pretty", ...definedEnv() }) : AppConfigLive),
  Layer.orElse(() => StderrLogging)
)

/** `--verbose` anywhere shows the whole cause of a failure; without it a failure is one line. */
const verbose = process.argv.includes("--verbose")
const argv = process.argv.filter((arg) => arg !== "--verbose")

const oneLine = (text: string) => text.split("\n")[0]!.replace(/^\w*Error: /, "")

/** What went wrong, in one line a person can act on. */
const describeFailure = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.squash(cause)
  if (ValidationError.isValidationError(failure)) return "" // @effect/cli has printed it already
  if (ConfigError.isConfigError(failure)) return describeConfigError(failure).map((line) => `bad setting ${line}`).join("\nmorsel: ")
  if (typeof failure === "object" && failure !== null && "_tag" in failure) {
    const tagged = failure as { readonly _tag: unknown; readonly message?: unknown }
    if (tagged._tag === "SqlError" || tagged._tag === "DatabaseUnavailable") {
      return `the database is unavailable (check DATABASE_URL or MORSEL_DATA_DIR): ${oneLine(String(tagged.message ?? failure))}`
    }
    if (typeof tagged.message === "string" && tagged.message !== "") return oneLine(tagged.message)
  }
  return oneLine(failure instanceof Error ? failure.message : String(failure))
}

const reportFailures = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchAllCause(effect, (cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.void
      : Effect.gen(function* () {
          const line = describeFailure(cause)
          const known = Cause.squash(cause) instanceof CliFailure || ConfigError.isConfigError(Cause.squash(cause))
          if (line !== "") yield* Console.error(`morsel: ${line}${verbose || known ? "" : " (--verbose for details)"}`)
          if (verbose) yield* Console.error(Cause.pretty(cause))
          process.exitCode = 1
        })
  )

/** Help and usage errors are ours (short, naming the option and the nearest command); the rest is the command's. */
const usage = readUsage(morsel.descriptor, argv.slice(2))
const ROOT_BUILT_INS = ["--version", "--wizard", "--completions"]
const answerUsage =
  usage._tag === "UsageError"
    ? Effect.zipRight(
        argv.includes("--json") ? Console.log(JSON.stringify({ error: { code: "usage", message: usage.message } }, null, 2)) : Console.error(`morsel: ${usage.message}`),
        Effect.sync(() => {
          process.exitCode = 1
        })
      )
    : Console.log(usage._tag === "Help" ? usage.text : "")
const main = Effect.suspend(() => (usage._tag === "Run" || argv.slice(2).some((arg) => ROOT_BUILT_INS.includes(arg)) ? run(argv) : answerUsage))

main.pipe(
  reportFailures,
  withTerminalConsole(argv.length <= 2 || argv.includes("--help") || argv.includes("-h")),
  Effect.provide(NodeContext.layer),
  Effect.provide(FetchHttpClient.layer),
  Effect.provide(logging),
  NodeRuntime.runMain({ disablePrettyLogger: true, disableErrorReporting: true })
)
