/** `morsel model …`: the vision model as the serve settings configure it; the check itself loads on demand. */
import { Command, Options } from "@effect/cli"
import { Effect } from "effect"
import { AppConfigLive } from "../config.ts"

const check = Command.make(
  "check",
  {
    photo: Options.file("photo", { exists: "yes" }).pipe(
      Options.withDescription("a photo of a meal (any photo `analyze` takes), prepared as `analyze` prepares it; default: a shipped lunch photo"),
      Options.optional
    ),
    json: Options.boolean("json").pipe(Options.withDescription("the check as JSON, for programs"))
  },
  (options) => Effect.flatMap(Effect.promise(() => import("./modelCheck.ts")), ({ runCheck }) =>
    // `--verbose` is taken anywhere on the line (src/cli.ts), so it is read from there.
    runCheck({ ...options, verbose: process.argv.includes("--verbose") }).pipe(Effect.provide(AppConfigLive)))
).pipe(
  Command.withDescription(
    "One call to the configured vision model (VISION_MODEL at OPENAI_BASE_URL): structured output, latency, tokens, cost with MODEL_PRICE_* set, the meal, and a verdict; no database, nothing charged; exit 1 when it does not work"
  )
)

export const model = Command.make("model").pipe(Command.withSubcommands([check]), Command.withDescription("The vision model as an operator checks it"))
