/** `morsel analyze`: sends a food photo to a running server through `morsel/client`, paid with card credits or per call over x402. */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option, Redacted } from "effect"
import { type AnalysisResult, type MorselClient, MorselError, type SettlementReceipt } from "../client/index.ts"
import { withProgress } from "../terminal.ts"
import { baseUrlOf, baseUrlOption, CliFailure, clientOf, cliFailureOf, jsonOption, keyOf, keyOption, reportFailure } from "./client.ts"
import { describeMore, printResult } from "./output.ts"
import { forgetPending, loadPending, pendingIdOf, savePending } from "./pending.ts"

/** An x402 receipt in words: who paid and the transaction that moved the 0.01 USDC. */
const describeReceipt = (receipt: SettlementReceipt) =>
  typeof receipt.payer === "string" && typeof receipt.transaction === "string"
    ? `paid 0.01 USDC over x402 from ${receipt.payer}, transaction ${receipt.transaction}`
    : `x402 receipt: ${JSON.stringify(receipt)}`

/** How this run is paid: a credit key, or a wallet answering the x402 challenge. */
const funding = (options: { readonly key: Option.Option<Redacted.Redacted>; readonly walletKey: Option.Option<Redacted.Redacted> }) =>
  Effect.gen(function* () {
    const key = keyOf(options.key)
    const walletKey = Option.orElse(options.walletKey, () => Option.map(Option.fromNullable(process.env["MORSEL_WALLET_KEY"] || undefined), Redacted.make))
    if (Option.isSome(key) && Option.isSome(walletKey)) {
      return yield* new CliFailure({ code: "usage", message: "give either --key or --wallet-key, not both" })
    }
    if (Option.isSome(key)) return { apiKey: Redacted.value(key.value) }
    if (Option.isSome(walletKey)) {
      const wallet = Redacted.value(walletKey.value).trim()
      if (!/^0x[0-9a-fA-F]{64}$/.test(wallet)) {
        return yield* new CliFailure({ code: "usage", message: "--wallet-key must be a 0x-prefixed 32-byte hex private key" })
      }
      return { walletPrivateKey: wallet }
    }
    return yield* new CliFailure({ code: "usage", message: "give --key (card credits) or --wallet-key (x402), or set MORSEL_API_KEY" })
  })

/**
 * The nine more nutrients of the items matched to a USDA record, from the free nutrition path at the items' grams;
 * a failure of that call only leaves them out.
 */
const printMore = (client: MorselClient, result: AnalysisResult) =>
  Effect.gen(function* () {
    const matched = result.items.flatMap((item) => (item.nutrition_source === "usda" && item.fdc_id !== null ? [{ ...item, fdc_id: item.fdc_id }] : []))
    if (matched.length === 0) return
    // The path takes 0.01 to 5000 g with two decimals; an analysis's grams are within it.
    const grams = (g: number) => Math.min(5000, Math.max(0.01, Math.round(g * 100) / 100))
    const answer = yield* Effect.tryPromise(() => client.nutrition(matched.map((item) => ({ fdc_id: item.fdc_id, grams: grams(item.estimated_grams) })))).pipe(Effect.option)
    if (Option.isSome(answer)) yield* Console.log(`\n${describeMore(matched.map((item) => item.name), answer.value, result.items.length)}`)
  })

/** The analysis, or on payment_pending the request kept for `--resume` and one line saying how. */
const finish = (client: MorselClient, run: () => Promise<AnalysisResult>, withCreditKey: boolean) =>
  Effect.tryPromise({ try: run, catch: (error) => error }).pipe(
    withProgress("analysing the photo…"),
    Effect.catchAll((error) => {
      const failure = cliFailureOf(client.baseUrl, error)
      const kept = error instanceof MorselError && error.code === "payment_pending" ? error.pending : undefined
      if (kept === undefined || !(error instanceof MorselError)) return Effect.fail(failure)
      // Only a well-formed UUID the server sent names the kept file: nothing is kept, wherever the answer points.
      const id = pendingIdOf(error.requestId)
      if (id === undefined) {
        const shown = error.requestId === undefined ? "none" : JSON.stringify(error.requestId.slice(0, 60))
        return Effect.fail(
          new CliFailure({
            ...failure,
            message: `HTTP 503 payment_pending: the answer carries no well-formed request_id (${shown}), so nothing was kept to resume; quote Idempotency-Key ${kept.idempotencyKey} to the server's support`
          })
        )
      }
      return Effect.zipRight(
        // The identical retry: same body and Idempotency-Key, and the signed authorization the server holds.
        savePending(id, client.baseUrl, kept, withCreditKey),
        Effect.fail(
          new CliFailure({
            ...failure,
            message: `HTTP 503 payment_pending: the result is saved and the payment is being confirmed; in a minute, without paying twice: morsel analyze --resume ${id}${withCreditKey ? " --key <key>" : ""}`
          })
        )
      )
    })
  )

export const analyze = Command.make(
  "analyze",
  {
    photo: Args.file({ name: "photo" }).pipe(
      Args.withDescription("a JPEG, PNG or WebP photo of any size (fitted to the API before sending)"),
      Args.optional
    ),
    language: Options.choice("language", ["en", "lt"]).pipe(Options.withDefault("en" as const), Options.withDescription("language of the names: en or lt")),
    grams: Options.float("grams").pipe(Options.optional, Options.withDescription("the meal's weighed total in grams (1 to 5000)")),
    baseUrl: baseUrlOption,
    key: keyOption,
    walletKey: Options.redacted("wallet-key").pipe(
      Options.optional,
      Options.withDescription("0x key of a wallet paying 0.01 USDC a call (or MORSEL_WALLET_KEY)")
    ),
    idempotencyKey: Options.text("idempotency-key").pipe(
      Options.optional,
      Options.withDescription("reuse to replay a result or retry a failure (default: new)")
    ),
    resume: Options.text("resume").pipe(
      Options.optional,
      Options.withDescription("retry a payment_pending analysis by its request_id")
    ),
    scenario: Options.text("scenario").pipe(
      Options.optional,
      Options.withDescription("sandbox: no_food, analysis_failed, analysis_timeout, payment_pending, rate_limited")
    ),
    json: jsonOption
  },
  (options) =>
    Effect.gen(function* () {
      let result: AnalysisResult
      let client: MorselClient
      if (Option.isSome(options.resume)) {
        if (Option.isSome(options.photo)) return yield* new CliFailure({ code: "usage", message: "give either a photo or --resume <request_id>, not both" })
        const kept = yield* loadPending(options.resume.value)
        // A wallet's signed authorization is in the kept request; a credit key is not kept on disk: it is given again.
        const key = keyOf(options.key)
        if (kept.withCreditKey && Option.isNone(key)) {
          return yield* new CliFailure({
            code: "usage",
            message: `analysis ${options.resume.value.toLowerCase()} is paid with credits: give its key again with --key or MORSEL_API_KEY`
          })
        }
        const apiKey = kept.withCreditKey ? Option.map(key, (k) => ({ apiKey: Redacted.value(k) })).pipe(Option.getOrElse(() => ({}))) : {}
        client = yield* clientOf(Option.some(kept.baseUrl), { ...apiKey, paymentPendingRetries: 0 })
        result = yield* finish(client, () => client.resume(kept.pending), kept.withCreditKey)
        yield* forgetPending(options.resume.value)
      } else {
        if (Option.isNone(options.photo)) {
          return yield* new CliFailure({ code: "usage", message: "give the photo to analyze: morsel analyze <photo> --key <key>" })
        }
        const photoPath = options.photo.value
        const paid = yield* funding(options)
        // payment_pending is left to `--resume`, so the command never waits a minute on its own.
        client = yield* clientOf(options.baseUrl, { ...paid, paymentPendingRetries: 0, ...Option.match(options.scenario, { onNone: () => ({}), onSome: (scenario) => ({ scenario }) }) })
        const photo = yield* Effect.tryPromise({ try: () => client.preparePhoto(photoPath), catch: (error) => cliFailureOf(baseUrlOf(options.baseUrl), error) })
        if (photo.change !== undefined) yield* Console.error(photo.change)
        const given = {
          language: options.language,
          ...Option.match(options.grams, { onNone: () => ({}), onSome: (grams) => ({ knownTotalGrams: grams }) }),
          ...Option.match(options.idempotencyKey, { onNone: () => ({}), onSome: (idempotencyKey) => ({ idempotencyKey }) })
        }
        result = yield* finish(client, () => client.analyze(photo.bytes, given), "apiKey" in paid)
      }
      const { receipt, ...body } = result
      yield* printResult(body, options.json)
      if (!options.json) yield* printMore(client, result)
      if (receipt !== undefined) yield* Console.error(describeReceipt(receipt))
    }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("Analyze a food photo, paid with card credits (--key) or over x402 (--wallet-key)"))
