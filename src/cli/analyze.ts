/** `morsel analyze`: sends a food photo to a running server, paid with card credits or per call over x402. */
import { randomUUID } from "node:crypto"
import { Args, Command, Options } from "@effect/cli"
import { FetchHttpClient } from "@effect/platform"
import { Console, Effect, Option, Redacted, Schema } from "effect"
import { withProgress } from "../terminal.ts"
import { baseUrlOf, baseUrlOption, bearer, CliFailure, errorCodeOf, jsonOption, keyOf, keyOption, parseJson, reportFailure, request } from "./client.ts"
import { printResult } from "./output.ts"
import { canonicalRequestId, forgetPending, loadPending, type PendingAnalysis, savePending } from "./pending.ts"
import { preparePhoto } from "./photo.ts"

/**
 * The transport under the HTTP client when a wallet pays: it answers x402 challenges from the wallet and remembers
 * each signed payment, so a payment_pending answer can be retried with the very same one. A 402 without a challenge
 * (x402 off on that server) is handed back as the server gave it, so its own words are shown. Loaded only when used.
 */
const payingFetch = (walletKey: Redacted.Redacted, sentSignatures: Array<string>) =>
  Effect.tryPromise({
    try: async () => {
      const { wrapFetchWithPayment, x402Client } = await import("@x402/fetch")
      const { ExactEvmScheme } = await import("@x402/evm/exact/client")
      const { privateKeyToAccount } = await import("viem/accounts")
      const account = privateKeyToAccount(Redacted.value(walletKey) as `0x${string}`)
      let refusal: Response | undefined
      const recording: typeof fetch = async (input, init) => {
        const signature = new Headers(input instanceof Request ? input.headers : init?.headers).get("payment-signature")
        if (signature !== null) sentSignatures.push(signature)
        const response = await globalThis.fetch(input, init)
        refusal = response.status === 402 && !response.headers.has("payment-required") ? response.clone() : undefined
        return response
      }
      const paying = wrapFetchWithPayment(recording, new x402Client().register("eip155:*", new ExactEvmScheme(account)))
      const transport: typeof fetch = async (input, init) => {
        try {
          return await paying(input, init)
        } catch (error) {
          if (refusal !== undefined) return refusal
          throw error
        }
      }
      return transport
    },
    catch: (cause) => new CliFailure({ message: `cannot pay with x402 here: ${cause instanceof Error ? cause.message : String(cause)}` })
  })

const decodeReceipt = (header: string | undefined): unknown =>
  header === undefined ? undefined : parseJson(Buffer.from(header, "base64").toString("utf8"))

/** An x402 receipt in words: who paid and the transaction that moved the 0.01 USDC. */
const describeReceipt = (receipt: unknown) =>
  Option.match(Schema.decodeUnknownOption(Schema.Struct({ payer: Schema.String, transaction: Schema.String }))(receipt), {
    onNone: () => `x402 receipt: ${JSON.stringify(receipt)}`,
    onSome: ({ payer, transaction }) => `paid 0.01 USDC over x402 from ${payer}, transaction ${transaction}`
  })

/** The request_id of a refusal, in its `error` object or beside it. */
const requestIdOf = (body: unknown): string | undefined => {
  if (typeof body !== "object" || body === null) return undefined
  if ("request_id" in body && typeof body.request_id === "string") return body.request_id
  return "error" in body ? requestIdOf(body.error) : undefined
}

/** How this run is paid: a credit key's Bearer header, or a wallet answering the x402 challenge. */
const funding = (options: { readonly key: Option.Option<Redacted.Redacted>; readonly walletKey: Option.Option<Redacted.Redacted> }, sentSignatures: Array<string>) =>
  Effect.gen(function* () {
    const key = keyOf(options.key)
    const walletKey = Option.orElse(options.walletKey, () => Option.map(Option.fromNullable(process.env["MORSEL_WALLET_KEY"] || undefined), Redacted.make))
    if (Option.isSome(key) && Option.isSome(walletKey)) {
      return yield* new CliFailure({ code: "usage", message: "give either --key or --wallet-key, not both" })
    }
    if (Option.isSome(key)) return { headers: bearer(key.value), transport: globalThis.fetch }
    if (Option.isSome(walletKey)) {
      if (!/^0x[0-9a-fA-F]{64}$/.test(Redacted.value(walletKey.value).trim())) {
        return yield* new CliFailure({ code: "usage", message: "--wallet-key must be a 0x-prefixed 32-byte hex private key" })
      }
      return { headers: {}, transport: yield* payingFetch(Redacted.make(Redacted.value(walletKey.value).trim()), sentSignatures) }
    }
    return yield* new CliFailure({ code: "usage", message: "give --key (card credits) or --wallet-key (x402), or set MORSEL_API_KEY" })
  })

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
      const sentSignatures: Array<string> = []
      let retry: PendingAnalysis
      let transport: typeof fetch = globalThis.fetch
      if (Option.isSome(options.resume)) {
        if (Option.isSome(options.photo)) return yield* new CliFailure({ code: "usage", message: "give either a photo or --resume <request_id>, not both" })
        const kept = yield* loadPending(options.resume.value)
        retry = kept
        if (kept.withCreditKey) {
          // The key is not kept on disk with the retry: it is given again, as the first run took it.
          const key = keyOf(options.key)
          if (Option.isNone(key)) {
            return yield* new CliFailure({
              code: "usage",
              message: `analysis ${options.resume.value.toLowerCase()} is paid with credits: give its key again with --key or MORSEL_API_KEY`
            })
          }
          retry = { ...kept, headers: { ...kept.headers, ...bearer(key.value) } }
        }
      } else {
        if (Option.isNone(options.photo)) {
          return yield* new CliFailure({ code: "usage", message: "give the photo to analyze: morsel analyze <photo> --key <key>" })
        }
        const paid = yield* funding(options, sentSignatures)
        const photo = yield* preparePhoto(options.photo.value)
        if (photo.change !== undefined) yield* Console.error(photo.change)
        transport = paid.transport
        retry = {
          url: `${baseUrlOf(options.baseUrl)}/v1/analyze`,
          withCreditKey: "authorization" in paid.headers,
          headers: {
            ...paid.headers,
            "idempotency-key": Option.getOrElse(options.idempotencyKey, () => `cli-${randomUUID()}`),
            ...Option.match(options.scenario, { onNone: () => ({}), onSome: (scenario) => ({ "sandbox-scenario": scenario }) })
          },
          body: {
            image_base64: photo.bytes.toString("base64"),
            mime_type: photo.mime,
            language: options.language,
            ...Option.match(options.grams, { onNone: () => ({}), onSome: (grams) => ({ known_total_grams: grams }) })
          }
        }
      }
      const sent = retry
      const reply = yield* request(sent.url, { method: "POST", headers: sent.headers, body: sent.body }).pipe(
        Effect.provideService(FetchHttpClient.Fetch, transport),
        withProgress("analysing the photo…"),
        Effect.catchTag("CliFailure", (failure) => {
          if (errorCodeOf(failure.answer) !== "payment_pending") return Effect.fail(failure)
          const given = requestIdOf(failure.answer)
          const id = given === undefined ? Option.none() : canonicalRequestId(given)
          if (Option.isNone(id)) {
            // A request id that is not a UUID names no file: nothing is kept, wherever the answer points.
            const shown = given === undefined ? "none" : JSON.stringify(given.slice(0, 60))
            return Effect.fail(
              new CliFailure({
                ...failure,
                message: `HTTP 503 payment_pending: the answer carries no well-formed request_id (${shown}), so nothing was kept to resume; quote Idempotency-Key ${sent.headers["idempotency-key"]} to the server's support`
              })
            )
          }
          // The identical retry: same body and Idempotency-Key, and the signed authorization the server holds.
          const signature = sentSignatures.at(-1)
          const kept = signature === undefined ? sent : { ...sent, headers: { ...sent.headers, "payment-signature": signature } }
          return savePending(id.value, kept).pipe(
            Effect.flatMap(() =>
              Effect.fail(
                new CliFailure({
                  ...failure,
                  message: `HTTP 503 payment_pending: the result is saved and the payment is being confirmed; in a minute, without paying twice: morsel analyze --resume ${id.value}${sent.withCreditKey ? " --key <key>" : ""}`
                })
              )
            )
          )
        })
      )
      if (Option.isSome(options.resume)) yield* forgetPending(options.resume.value)
      yield* printResult(reply.body, options.json)
      const receipt = decodeReceipt(reply.response.headers["payment-response"])
      if (receipt !== undefined) yield* Console.error(describeReceipt(receipt))
    }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("Analyze a food photo, paid with card credits (--key) or over x402 (--wallet-key)"))
