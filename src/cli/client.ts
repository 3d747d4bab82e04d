/** What the client commands share: the server and key options, one HTTP exchange with the server, failures on stderr. */
import { Options } from "@effect/cli"
import { HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Console, Data, Effect, Option, Redacted } from "effect"

/** A client command that could not do its job: printed on stderr, exit code 1. */
export class CliFailure extends Data.TaggedError("CliFailure")<{ readonly message: string }> {}

const DEFAULT_BASE_URL = "http://127.0.0.1:8787"

export const baseUrlOption = Options.text("base-url").pipe(
  Options.optional,
  Options.withDescription(`the morsel server (default: MORSEL_BASE_URL, else ${DEFAULT_BASE_URL})`)
)
export const baseUrlOf = (given: Option.Option<string>) =>
  Option.getOrElse(given, () => process.env["MORSEL_BASE_URL"] || DEFAULT_BASE_URL).replace(/\/+$/, "")

export const keyOption = Options.redacted("key").pipe(
  Options.optional,
  Options.withDescription("your credit API key (default: MORSEL_API_KEY; the environment keeps it out of shell history)")
)
export const keyOf = (given: Option.Option<Redacted.Redacted>) =>
  Option.orElse(given, () => Option.map(Option.fromNullable(process.env["MORSEL_API_KEY"] || undefined), Redacted.make))
export const requireKey = (given: Option.Option<Redacted.Redacted>) =>
  Option.match(keyOf(given), {
    onNone: () => Effect.fail(new CliFailure({ message: "give --key or set MORSEL_API_KEY" })),
    onSome: Effect.succeed
  })

export const bearer = (key: Redacted.Redacted) => ({ authorization: `Bearer ${Redacted.value(key)}` })

export const jsonOption = Options.boolean("json").pipe(Options.withDescription("print the server's JSON answer as it is, for programs"))

/** Prints a failed client command on stderr and sets exit code 1, without a stack trace. */
export const reportFailure = <A, R>(effect: Effect.Effect<A, CliFailure, R>) =>
  effect.pipe(
    Effect.catchTag("CliFailure", (failure) =>
      Console.error(failure.message).pipe(
        Effect.zipRight(
          Effect.sync(() => {
            process.exitCode = 1
          })
        )
      )
    )
  )

export interface Reply {
  readonly response: HttpClientResponse.HttpClientResponse
  readonly body: unknown
}

export const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** One HTTP exchange with the server; non-2xx answers fail with the server's `error.code` and message. */
export const request = (
  url: string,
  init: { readonly method: "GET" | "POST"; readonly headers?: Record<string, string>; readonly body?: unknown }
) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const outgoing = HttpClientRequest.make(init.method)(url).pipe(HttpClientRequest.setHeaders(init.headers ?? {}))
    const reply = yield* client.execute(init.body === undefined ? outgoing : HttpClientRequest.bodyUnsafeJson(outgoing, init.body)).pipe(
      Effect.flatMap((response) => Effect.map(response.text, (text): Reply => ({ response, body: parseJson(text) }))),
      Effect.mapError((error) => {
        // The transport's own words ("fetch failed"), not the client's wrapper around them.
        const message = error.cause instanceof Error ? error.cause.message : error.message
        return new CliFailure({ message: `request to ${url} failed: ${message}` })
      })
    )
    if (reply.response.status >= 200 && reply.response.status < 300) return reply
    return yield* new CliFailure({ message: describeHttpError(reply) })
  })

const describeHttpError = ({ body, response }: Reply) => {
  const error = typeof body === "object" && body !== null && "error" in body ? body.error : undefined
  const detail =
    typeof error === "object" && error !== null && "code" in error && "message" in error ? `${String(error.code)}: ${String(error.message)}` : String(body)
  const retry = response.headers["retry-after"]
  return `HTTP ${response.status} ${detail}${retry ? ` (retry after ${retry} s)` : ""}`
}
