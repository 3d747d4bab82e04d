/** What the client commands share: the server and key options, the `morsel/client` they talk through, failures on stderr. */
import { Options } from "@effect/cli"
import { Console, Data, Effect, Option, Redacted } from "effect"
import { createClient, type ClientOptions, type MorselClient, MorselError } from "../client/index.ts"

/**
 * A client command that could not do its job: one line on stderr, or JSON on stdout under --json; exit code 1.
 * `code` names it for programs; a refusal by the server keeps its status and body.
 */
export class CliFailure extends Data.TaggedError("CliFailure")<{
  readonly message: string
  readonly code?: string
  readonly status?: number
  readonly answer?: unknown
}> {}

const DEFAULT_BASE_URL = "http://127.0.0.1:8787"

export const baseUrlOption = Options.text("base-url").pipe(
  Options.optional,
  Options.withDescription(`the server (or MORSEL_BASE_URL; default ${DEFAULT_BASE_URL})`)
)
export const baseUrlOf = (given: Option.Option<string>) =>
  Option.getOrElse(given, () => process.env["MORSEL_BASE_URL"] || DEFAULT_BASE_URL).replace(/\/+$/, "")

export const keyOption = Options.redacted("key").pipe(
  Options.optional,
  Options.withDescription("your credit key (or MORSEL_API_KEY, kept out of shell history)")
)
export const keyOf = (given: Option.Option<Redacted.Redacted>) =>
  Option.orElse(given, () => Option.map(Option.fromNullable(process.env["MORSEL_API_KEY"] || undefined), Redacted.make))
export const requireKey = (given: Option.Option<Redacted.Redacted>) =>
  Option.match(keyOf(given), {
    onNone: () => Effect.fail(new CliFailure({ message: "give --key or set MORSEL_API_KEY" })),
    onSome: Effect.succeed
  })

export const jsonOption = Options.boolean("json").pipe(Options.withDescription("the server's JSON answer as it is (errors too), for programs"))

/** A failure as JSON for programs: the server's own answer with its status, else `{ error: { code, message } }`. */
export const failureJson = (failure: CliFailure): unknown =>
  typeof failure.answer === "object" && failure.answer !== null
    ? { status: failure.status, ...failure.answer }
    : { error: { code: failure.code ?? "cli_error", message: failure.message } }

/** Prints a failed client command (one line on stderr, or JSON on stdout with `json`) and sets exit code 1, without a stack trace. */
export const reportFailure =
  (json: boolean) =>
  <A, R>(effect: Effect.Effect<A, CliFailure, R>) =>
    effect.pipe(
      Effect.catchTag("CliFailure", (failure) =>
        (json ? Console.log(JSON.stringify(failureJson(failure), null, 2)) : Console.error(`morsel: ${failure.message}`)).pipe(
          Effect.zipRight(
            Effect.sync(() => {
              process.exitCode = 1
            })
          )
        )
      )
    )

/** The innermost reason of a failed connection ("connect ECONNREFUSED 127.0.0.1:8787"), not the wrappers' "fetch failed". */
const rootCause = (cause: unknown): string => {
  let current = cause
  while (current instanceof Error && current.cause instanceof Error) current = current.cause
  return current instanceof Error ? current.message : String(current)
}

/** A server that cannot be reached, with what to do about it. */
export const unreachable = (url: string, cause: unknown) => {
  const server = url.replace(/\/(v1|admin|sandbox)\/.*$/, "")
  return new CliFailure({
    code: "server_unreachable",
    message: `cannot reach the morsel server at ${server} (${rootCause(cause)}): start one with \`morsel serve --sandbox\`, or give --base-url or set MORSEL_BASE_URL`
  })
}

/** A failure of `morsel/client` as the command reports it: the server's refusal with its answer, or what to fix. */
export const cliFailureOf = (baseUrl: string, error: unknown): CliFailure => {
  if (!(error instanceof MorselError)) return new CliFailure({ message: error instanceof Error ? error.message : String(error) })
  if (error.code === "server_unreachable") return unreachable(baseUrl, error.cause)
  return new CliFailure({
    message: error.message,
    code: error.code,
    ...(error.status === undefined ? {} : { status: error.status, answer: error.body })
  })
}

/** The client the commands talk to the server with (the one way to talk to morsel), and its base URL. */
export const clientOf = (baseUrl: Option.Option<string>, options: Omit<ClientOptions, "baseUrl"> = {}) =>
  Effect.try({
    try: () => createClient({ baseUrl: baseUrlOf(baseUrl), ...options }),
    catch: (error) => cliFailureOf(baseUrlOf(baseUrl), error)
  })

/** One call of the client, its failure reported as the command's. */
export const use = <A>(client: MorselClient, call: (client: MorselClient) => Promise<A>) =>
  Effect.tryPromise({ try: () => call(client), catch: (error) => cliFailureOf(client.baseUrl, error) })
