/** The `morsel` command line: serve, migrate, keys, and thin clients of a running server (analyze, credits, admin). */
import { randomBytes, randomUUID } from "node:crypto"
import { readFile } from "node:fs/promises"
import { createServer as createNetServer } from "node:net"
import { Args, Command, Options, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, ConfigError, Console, Data, Effect, Layer, Option, Redacted, Schema } from "effect"
import { FingerprintArg } from "./admin/AdminRpc.ts"
import { describeAdminError, makeAdminClient } from "./admin/client.ts"
import { AppConfig } from "./config.ts"
import * as Database from "./db/Database.ts"
import { LoggingLive } from "./logging.ts"
import { AnalysisResult, Balance, CheckoutResponse, CheckoutStatus } from "./domain/schemas.ts"
import { type Column, table, withProgress, withTerminalConsole } from "./terminal.ts"
import { fooddbCommand } from "./foods/cli.ts"
import { SERVICE_VERSION } from "./version.ts"

/** A client command that could not do its job: printed on stderr, exit code 1. */
class CliFailure extends Data.TaggedError("CliFailure")<{ readonly message: string }> {}

/** A port another program holds is reported at once, before the database and the rest start. */
const ensurePortFree = Effect.gen(function* () {
  const { host, port } = yield* AppConfig
  if (port === 0) return
  const free = yield* Effect.async<boolean>((resume) => {
    const probe = createNetServer()
    probe.once("error", () => resume(Effect.succeed(false)))
    probe.listen(port, host, () => probe.close(() => resume(Effect.succeed(true))))
  })
  if (!free) yield* new CliFailure({ message: `port ${port} on ${host} is already in use: stop the other server or set PORT` })
}).pipe(Effect.provide(AppConfig.layer))

// Loaded on demand: the client commands start quickly without the whole service.
const serve = Command.make(
  "serve",
  {
    sandbox: Options.boolean("sandbox").pipe(
      Options.withDescription("serve the sandbox: every outside service simulated in memory, no settings needed, nothing charged")
    )
  },
  ({ sandbox }) =>
    sandbox
      ? Effect.flatMap(Effect.promise(() => import("./sandbox/Sandbox.ts")), ({ SandboxLive }) => Layer.launch(SandboxLive()))
      : ensurePortFree.pipe(
          Effect.zipRight(Effect.promise(() => import("./server.ts"))),
          Effect.flatMap(({ ServerLive }) => Layer.launch(ServerLive))
        )
).pipe(
  Command.withDescription("Serve the REST API, the docs and the tool interface (migrations applied first); --sandbox for the offline sandbox")
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

const DEFAULT_BASE_URL = "http://127.0.0.1:8787"

/** The process environment without unset variables. */
const definedEnv = () => Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined))

const baseUrlOption = Options.text("base-url").pipe(
  Options.optional,
  Options.withDescription(`the morsel server (default: MORSEL_BASE_URL, else ${DEFAULT_BASE_URL})`)
)
const baseUrlOf = (given: Option.Option<string>) =>
  Option.getOrElse(given, () => process.env["MORSEL_BASE_URL"] || DEFAULT_BASE_URL).replace(/\/+$/, "")

const keyOption = Options.redacted("key").pipe(
  Options.optional,
  Options.withDescription("your credit API key (default: MORSEL_API_KEY; the environment keeps it out of shell history)")
)
const keyOf = (given: Option.Option<Redacted.Redacted>) =>
  Option.orElse(given, () => Option.map(Option.fromNullable(process.env["MORSEL_API_KEY"] || undefined), Redacted.make))
const requireKey = (given: Option.Option<Redacted.Redacted>) =>
  Option.match(keyOf(given), {
    onNone: () => Effect.fail(new CliFailure({ message: "give --key or set MORSEL_API_KEY" })),
    onSome: Effect.succeed
  })

/** Prints a failed client command on stderr and sets exit code 1, without a stack trace. */
const reportFailure = <A, R>(effect: Effect.Effect<A, CliFailure, R>) =>
  effect.pipe(
    Effect.catchTag("CliFailure", (failure) =>
      Console.error(failure.message).pipe(Effect.zipRight(
          Effect.sync(() => {
            process.exitCode = 1
          })
        ))
    )
  )

interface Reply {
  readonly response: Response
  readonly body: unknown
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** One HTTP exchange with the server; non-2xx answers fail with the server's `error.code` and message. */
const request = (
  url: string,
  init: { readonly method: "GET" | "POST"; readonly headers?: Record<string, string>; readonly body?: unknown },
  fetcher: typeof fetch = fetch
) =>
  Effect.gen(function* () {
    const reply = yield* Effect.tryPromise({
      try: async (): Promise<Reply> => {
        const response = await fetcher(url, {
          method: init.method,
          headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
          ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
        })
        return { response, body: parseJson(await response.text()) }
      },
      catch: (cause) => new CliFailure({ message: `request to ${url} failed: ${cause instanceof Error ? cause.message : String(cause)}` })
    })
    if (reply.response.ok) return reply
    return yield* new CliFailure({ message: describeHttpError(reply) })
  })

const describeHttpError = ({ body, response }: Reply) => {
  const error = typeof body === "object" && body !== null && "error" in body ? body.error : undefined
  const detail =
    typeof error === "object" && error !== null && "code" in error && "message" in error ? `${String(error.code)}: ${String(error.message)}` : String(body)
  const retry = response.headers.get("retry-after")
  return `HTTP ${response.status} ${detail}${retry ? ` (retry after ${retry} s)` : ""}`
}

const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

const jsonOption = Options.boolean("json").pipe(Options.withDescription("print the server's JSON answer as it is, for programs"))

/** Words for people, or with --json the server's body; a body that is not the expected shape is printed as JSON. */
const printAs =
  <A, I>(schema: Schema.Schema<A, I>, words: (value: A) => string) =>
  (body: unknown, json: boolean) =>
    json
      ? printJson(body)
      : Option.match(Schema.decodeUnknownOption(schema)(body), { onNone: () => printJson(body), onSome: (value) => Console.log(words(value)) })

const n1 = (x: number) => x.toFixed(1)
const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

const RESULT_COLUMNS: ReadonlyArray<Column> = [
  { title: "component" },
  { title: "grams", align: "right" },
  { title: "kcal", align: "right" },
  { title: "protein g", align: "right" },
  { title: "carbs g", align: "right" },
  { title: "fat g", align: "right" },
  { title: "source" }
]

/** An analysis as a table of components with the meal's totals. */
export const describeResult = (result: AnalysisResult): string => {
  const rows = result.items.map((item) => [
    clip(item.name, 32),
    item.estimated_grams.toFixed(1),
    n1(item.nutrition.kcal),
    n1(item.nutrition.protein_g),
    n1(item.nutrition.carbs_g),
    n1(item.nutrition.fat_g),
    item.nutrition_source === "usda" ? `USDA ${clip(item.matched_name ?? item.fdc_id ?? "", 36)}` : "AI estimate"
  ])
  const t = result.totals
  const totals = ["total", result.estimated_total_grams.toFixed(1), n1(t.kcal), n1(t.protein_g), n1(t.carbs_g), n1(t.fat_g), ""]
  return [
    result.dish_name,
    "",
    table(RESULT_COLUMNS, rows, totals),
    "",
    `An estimate (model ${result.model}, matcher ${result.matcher_version}), not medical or allergen advice.`,
    `request ${result.request_id}`
  ].join("\n")
}

const printResult = printAs(AnalysisResult, describeResult)
const printBalance = printAs(
  Balance,
  (b) => `${b.credits_remaining} credits${b.blocked ? ", key paused pending support review" : ""}${b.test_mode ? " (test mode)" : ""}`
)
const printCheckout = printAs(CheckoutResponse, (c) =>
  c.checkout_url !== undefined
    ? `Pay at ${c.checkout_url}\norder ${c.order_id}: ${c.credits ?? 500} credits for USD ${c.amount_usd ?? "5.00"}`
    : `order ${c.order_id} is already ${c.state ?? "complete"}: no new checkout`
)
const printStatus = printAs(
  CheckoutStatus,
  (s) =>
    `order ${s.order_id}: ${s.state}${s.checkout_url ? ` — pay at ${s.checkout_url}` : ""}\n${s.credits_remaining} credits${s.blocked ? ", key paused" : ""}${s.test_mode ? " (test mode)" : ""}`
)

const bearer = (key: Redacted.Redacted) => ({ authorization: `Bearer ${Redacted.value(key)}` })

/** JPEG or PNG from the magic bytes; the server checks them again. */
const mimeOf = (bytes: Buffer): Option.Option<"image/jpeg" | "image/png"> =>
  bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff
    ? Option.some("image/jpeg")
    : bytes.subarray(0, 4).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47]))
      ? Option.some("image/png")
      : Option.none()

/** A fetch that pays x402 challenges from the wallet; loaded only when a wallet is used. */
const payingFetch = (walletKey: Redacted.Redacted, sentSignatures: Array<string>) =>
  Effect.tryPromise({
    try: async () => {
      const { wrapFetchWithPayment, x402Client } = await import("@x402/fetch")
      const { ExactEvmScheme } = await import("@x402/evm/exact/client")
      const { privateKeyToAccount } = await import("viem/accounts")
      const account = privateKeyToAccount(Redacted.value(walletKey) as `0x${string}`)
      // Remember the signed payment, so a payment_pending answer can be retried with the very same one.
      const recording: typeof fetch = (input, init) => {
        const signature = new Headers(input instanceof Request ? input.headers : init?.headers).get("payment-signature")
        if (signature !== null) sentSignatures.push(signature)
        return fetch(input, init)
      }
      return wrapFetchWithPayment(recording, new x402Client().register("eip155:*", new ExactEvmScheme(account)))
    },
    catch: (cause) => new CliFailure({ message: `cannot pay with x402 here: ${cause instanceof Error ? cause.message : String(cause)}` })
  })

const decodeReceipt = (header: string | null): unknown =>
  header === null ? undefined : parseJson(Buffer.from(header, "base64").toString("utf8"))

const analyze = Command.make(
  "analyze",
  {
    photo: Args.file({ name: "photo", exists: "yes" }).pipe(Args.withDescription("a JPEG or PNG food photo (at most 2 MB)")),
    language: Options.choice("language", ["en", "lt"]).pipe(Options.withDefault("en" as const)),
    grams: Options.float("grams").pipe(Options.optional, Options.withDescription("the meal's known total weight in grams")),
    baseUrl: baseUrlOption,
    key: keyOption,
    walletKey: Options.redacted("wallet-key").pipe(
      Options.optional,
      Options.withDescription("0x private key of a Base wallet paying 0.01 USDC per call over x402 (default: MORSEL_WALLET_KEY)")
    ),
    idempotencyKey: Options.text("idempotency-key").pipe(
      Options.optional,
      Options.withDescription("reuse to replay a saved result or retry a failed or pending analysis (default: a new one per run)")
    ),
    paymentSignature: Options.text("payment-signature").pipe(
      Options.optional,
      Options.withDescription("retry a payment_pending analysis with the PAYMENT-SIGNATURE it was sent with (printed then)")
    ),
    json: jsonOption
  },
  (options) =>
    Effect.gen(function* () {
      const url = `${baseUrlOf(options.baseUrl)}/v1/analyze`
      const bytes = yield* Effect.promise(() => readFile(options.photo))
      const mime = yield* Option.match(mimeOf(bytes), {
        onNone: () => Effect.fail(new CliFailure({ message: `${options.photo} is neither a JPEG nor a PNG` })),
        onSome: Effect.succeed
      })
      const idempotencyKey = Option.getOrElse(options.idempotencyKey, () => `cli-${randomUUID()}`)
      const body = {
        image_base64: bytes.toString("base64"),
        mime_type: mime,
        language: options.language,
        ...Option.match(options.grams, { onNone: () => ({}), onSome: (grams) => ({ known_total_grams: grams }) })
      }
      const key = keyOf(options.key)
      const walletKey = Option.orElse(options.walletKey, () =>
        Option.map(Option.fromNullable(process.env["MORSEL_WALLET_KEY"] || undefined), Redacted.make)
      )
      const headers: Record<string, string> = { "idempotency-key": idempotencyKey }
      const sentSignatures: Array<string> = []
      let fetcher: typeof fetch = fetch
      if (Option.isSome(options.paymentSignature)) {
        headers["payment-signature"] = options.paymentSignature.value
      } else if (Option.isSome(key) && Option.isSome(walletKey)) {
        return yield* new CliFailure({ message: "give either --key or --wallet-key, not both" })
      } else if (Option.isSome(key)) {
        Object.assign(headers, bearer(key.value))
      } else if (Option.isSome(walletKey)) {
        if (!/^0x[0-9a-fA-F]{64}$/.test(Redacted.value(walletKey.value))) {
          return yield* new CliFailure({ message: "--wallet-key must be a 0x-prefixed 32-byte hex private key" })
        }
        fetcher = yield* payingFetch(walletKey.value, sentSignatures)
      } else {
        return yield* new CliFailure({ message: "give --key (card credits) or --wallet-key (x402), or set MORSEL_API_KEY" })
      }
      const reply = yield* request(url, { method: "POST", headers, body }, fetcher).pipe(
        withProgress("analysing the photo…"),
        Effect.tapError(() => {
          const signature = sentSignatures.at(-1) ?? Option.getOrUndefined(options.paymentSignature)
          return signature === undefined
            ? Console.error(`idempotency key: ${idempotencyKey}`)
            : Console.error(
                `to retry without paying twice: morsel analyze ${options.photo} --idempotency-key ${idempotencyKey} --payment-signature ${signature}`
              )
        })
      )
      const receipt = decodeReceipt(reply.response.headers.get("payment-response"))
      if (receipt !== undefined) yield* Console.error(`x402 receipt: ${JSON.stringify(receipt)}`)
      yield* printResult(reply.body, options.json)
    }).pipe(reportFailure)
).pipe(Command.withDescription("Analyze a food photo on a running server, paid with card credits (--key) or per call over x402 (--wallet-key)"))

const buy = Command.make(
  "buy",
  { baseUrl: baseUrlOption, key: keyOption, orderId: Options.text("order-id").pipe(Options.optional), json: jsonOption },
  (options) =>
    Effect.gen(function* () {
      const key = yield* requireKey(options.key)
      const orderId = Option.getOrElse(options.orderId, () => randomUUID())
      const reply = yield* request(`${baseUrlOf(options.baseUrl)}/v1/credits/checkout`, {
        method: "POST",
        headers: bearer(key),
        body: { order_id: orderId }
      })
      yield* printCheckout(reply.body, options.json)
      yield* Console.error(`keep the order_id (${orderId}) and ask: morsel credits status --order-id ${orderId}`)
    }).pipe(reportFailure)
).pipe(Command.withDescription("Start (or, with --order-id, recover) a checkout of 500 credits for USD 5.00; prints checkout_url and order_id"))

const balance = Command.make("balance", { baseUrl: baseUrlOption, key: keyOption, json: jsonOption }, (options) =>
  Effect.gen(function* () {
    const key = yield* requireKey(options.key)
    const reply = yield* request(`${baseUrlOf(options.baseUrl)}/v1/credits/balance`, { method: "GET", headers: bearer(key) })
    yield* printBalance(reply.body, options.json)
  }).pipe(reportFailure)
).pipe(Command.withDescription("Credits remaining on the key and whether it is paused"))

const status = Command.make("status", { baseUrl: baseUrlOption, key: keyOption, orderId: Options.text("order-id"), json: jsonOption }, (options) =>
  Effect.gen(function* () {
    const key = yield* requireKey(options.key)
    const reply = yield* request(`${baseUrlOf(options.baseUrl)}/v1/credits/checkout-status`, {
      method: "POST",
      headers: bearer(key),
      body: { order_id: options.orderId }
    })
    yield* printStatus(reply.body, options.json)
  }).pipe(reportFailure)
).pipe(Command.withDescription("State of an order (open, paid, expired, unresolved, not_issued, reversed); never creates a checkout"))

const credits = Command.make("credits").pipe(Command.withSubcommands([buy, balance, status]), Command.withDescription("Prepaid card credits"))

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
      const client = yield* makeAdminClient(baseUrlOf(options.baseUrl), token)
      const answer = yield* call(client).pipe(
        Effect.catchAll((error) => Effect.flatMap(describeAdminError(error), (message) => Effect.fail(new CliFailure({ message }))))
      )
      yield* printJson(answer)
    }).pipe(Effect.scoped, reportFailure)

const adminOptions = { baseUrl: baseUrlOption, token: tokenOption }

const admin = Command.make("admin").pipe(
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
  Command.withDescription("The admin interface of a running server (POST /admin/rpc, bearer ADMIN_TOKEN)")
)

export const morsel = Command.make("morsel").pipe(Command.withSubcommands([serve, migrate, key, fooddb, analyze, credits, admin]))

const run = Command.run(morsel, { name: "morsel", version: SERVICE_VERSION })

/** A bad setting is reported by the command that reads the settings, not by the logger; the sandbox logs readable lines by default. */
const logging = LoggingLive.pipe(
  Layer.provide(process.argv.includes("--sandbox") ? AppConfig.fromEnv({ LOG_FORMAT: "pretty", ...definedEnv() }) : AppConfig.layer),
  Layer.orElse(() => Layer.empty)
)

/** `--verbose` anywhere shows the whole cause of a failure; without it a failure is one line. */
const verbose = process.argv.includes("--verbose")
const argv = process.argv.filter((arg) => arg !== "--verbose")

const oneLine = (text: string) => text.split("\n")[0]!.replace(/^\w*Error: /, "")

/** What went wrong, in one line a person can act on. */
const describeFailure = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.squash(cause)
  if (ValidationError.isValidationError(failure)) return "" // @effect/cli has printed it already
  if (ConfigError.isConfigError(failure)) return `bad setting: ${oneLine(String(failure))}`
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
          const known = Cause.squash(cause) instanceof CliFailure
          if (line !== "") yield* Console.error(`morsel: ${line}${verbose || known ? "" : " (--verbose for details)"}`)
          if (verbose) yield* Console.error(Cause.pretty(cause))
          process.exitCode = 1
        })
  )

run(argv).pipe(
  reportFailures,
  withTerminalConsole(argv.length <= 2 || argv.includes("--help") || argv.includes("-h")),
  Effect.provide(NodeContext.layer),
  Effect.provide(logging),
  NodeRuntime.runMain({ disablePrettyLogger: true, disableErrorReporting: true })
)
