/** `morsel admin`: the admin interface of a running server, one RPC per subcommand, answers printed as JSON. */
import { Args, Command, Options } from "@effect/cli"
import { HttpClientError } from "@effect/platform"
import { Effect, Option, Redacted, Schema } from "effect"
import { FingerprintArg } from "../admin/AdminRpc.ts"
import { describeAdminError, makeAdminClient } from "../admin/client.ts"
import { baseUrlOf, baseUrlOption, CliFailure, reportFailure, unreachable } from "./client.ts"
import { printJson } from "./output.ts"

const tokenOption = Options.redacted("token").pipe(Options.optional, Options.withDescription("the server's ADMIN_TOKEN (default: ADMIN_TOKEN)"))

/** One admin RPC call against `--base-url`, printed as JSON. */
const adminCall =
  <A>(call: (client: Effect.Effect.Success<ReturnType<typeof makeAdminClient>>) => Effect.Effect<A, Parameters<typeof describeAdminError>[0]>) =>
  (options: { readonly baseUrl: Option.Option<string>; readonly token: Option.Option<Redacted.Redacted> }) =>
    Effect.gen(function* () {
      const token = yield* Option.match(
        Option.orElse(options.token, () => Option.map(Option.fromNullable(process.env["ADMIN_TOKEN"] || undefined), Redacted.make)),
        { onNone: () => Effect.fail(new CliFailure({ message: "give --token or set ADMIN_TOKEN" })), onSome: Effect.succeed }
      )
      const baseUrl = baseUrlOf(options.baseUrl)
      const client = yield* makeAdminClient(baseUrl, token)
      const answer = yield* call(client).pipe(
        Effect.catchAll((error) =>
          // No connection at all: the same hint as every client command (start a server, or point at one).
          "cause" in error && HttpClientError.isHttpClientError(error.cause) && error.cause._tag === "RequestError"
            ? Effect.fail(unreachable(`${baseUrl}/admin/rpc`, error.cause.cause))
            : Effect.flatMap(describeAdminError(error), (message) => Effect.fail(new CliFailure({ message })))
        )
      )
      yield* printJson(answer)
    }).pipe(Effect.scoped, reportFailure(false))

const adminOptions = { baseUrl: baseUrlOption, token: tokenOption }

export const admin = Command.make("admin").pipe(
  Command.withSubcommands([
    Command.make("paused", adminOptions, adminCall((c) => c.ListPausedKeys())).pipe(
      Command.withDescription("Keys paused by a refund or dispute: fingerprint prefix, balance, reason")
    ),
    Command.make(
      "unblock",
      { ...adminOptions, fingerprint: Args.text({ name: "fingerprint" }).pipe(Args.withSchema(FingerprintArg), Args.withDescription("a fingerprint or its prefix (8+ hex)")) },
      (options) => adminCall((c) => c.UnblockKey({ fingerprint: options.fingerprint }))(options)
    ).pipe(Command.withDescription("Lift a key's pause; its balance stays as it is")),
    Command.make("pending", adminOptions, adminCall((c) => c.ListPendingSettlements())).pipe(
      Command.withDescription("Analyses whose x402 payment awaits settlement")
    ),
    Command.make("reconcile", adminOptions, adminCall((c) => c.ReconcileNow())).pipe(
      Command.withDescription("Run one reconciliation pass over submitted x402 payments now")
    ),
    Command.make(
      "request",
      { ...adminOptions, requestId: Args.text({ name: "request_id" }).pipe(Args.withSchema(Schema.UUID)) },
      (options) => adminCall((c) => c.LookupRequest({ request_id: options.requestId }))(options)
    ).pipe(Command.withDescription("One analysis request: status, payer, times, failure code, whether a result is stored")),
    Command.make("counters", adminOptions, adminCall((c) => c.Counters())).pipe(
      Command.withDescription("Requests by status in the last 24 h, credits granted and consumed, x402 settlements")
    )
  ]),
  Command.withDescription("The admin interface of a running server (ADMIN_TOKEN)")
)
