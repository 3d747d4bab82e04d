/** What the client commands share: the server and key options, one HTTP exchange with the server, failures on stderr. */
import { Options } from "@effect/cli"
import { HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Console, Data, Effect, Option, Redacted } from "effect"

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

export const bearer = (key: Redacted.Redacted) => ({ authorization: `Bearer ${Redacted.value(key)}` })

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
      Effect.mapError((error) => unreachable(url, error.cause))
    )
    if (reply.response.status >= 200 && reply.response.status < 300) return reply
    return yield* new CliFailure({ message: describeHttpError(reply), code: errorCodeOf(reply.body), status: reply.response.status, answer: reply.body })
  })

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

/** The server's `error.code` of a refusal, when its body has one. */
export const errorCodeOf = (body: unknown): string | undefined => {
  const error = typeof body === "object" && body !== null && "error" in body ? body.error : undefined
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined
}

const describeHttpError = ({ body, response }: Reply) => {
  const error = typeof body === "object" && body !== null && "error" in body ? body.error : undefined
  const detail =
    typeof error === "object" && error !== null && "code" in error && "message" in error ? `${String(error.code)}: ${String(error.message)}` : String(body)
  const retry = response.headers["retry-after"]
  return `HTTP ${response.status} ${detail}${retry ? ` (retry after ${retry} s)` : ""}`
}
