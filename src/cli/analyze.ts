/** `morsel analyze`: sends a food photo to a running server through `morsel/client`, paid with card credits or per call over x402. */
import { createHash } from "node:crypto"
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option, Redacted } from "effect"
import { type AnalysisResult, type AnalyzeOptions, type MorselClient, MorselError, type SettlementReceipt } from "../client/index.ts"
import { priceOf, unitsOf } from "../client/price.ts"
import { withProgress } from "../terminal.ts"
import { baseUrlOf, baseUrlOption, CliFailure, clientOf, cliFailureOf, jsonOption, keyOf, keyOption, reportFailure } from "./client.ts"
import { describeMore, printResult } from "./output.ts"
import { forgetPending, loadPending, pendingIdOf, savePending } from "./pending.ts"

/** An x402 receipt in words: who paid and the transaction that moved the 0.01 USDC (or at most the price allowed). */
const describeReceipt = (receipt: SettlementReceipt, maxPrice: string | undefined) =>
  typeof receipt.payer === "string" && typeof receipt.transaction === "string"
    ? `paid ${maxPrice === undefined ? "0.01 USDC" : `at most ${maxPrice} USDC`} over x402 from ${receipt.payer}, transaction ${receipt.transaction}`
    : `x402 receipt: ${JSON.stringify(receipt)}`

/** The price a refused server asked, as `--max-price` takes it ("1"), when it asked one in USDC units. */
const askedPrice = (body: unknown) => {
  const offers = typeof body === "object" && body !== null && "asked" in body && Array.isArray(body.asked) ? (body.asked as ReadonlyArray<unknown>) : []
  const amounts = offers.flatMap((offer) =>
    typeof offer === "object" && offer !== null && "amount" in offer && typeof offer.amount === "string" && /^\d{1,30}$/.test(offer.amount) ? [BigInt(offer.amount)] : []
  )
  const lowest = amounts.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))[0]
  return lowest === undefined ? undefined : priceOf(lowest)
}

/** A refused price in the command's words: the fix is `--max-price`, not the library's option. */
const priceFailure = (failure: CliFailure, error: MorselError) => {
  const asked = askedPrice(error.body)
  return new CliFailure({ ...failure, message: error.message.replace(/allow it with maxPricePerAnalysis$/, `allow it with --max-price ${asked ?? "<USDC>"}`) })
}

const sha256 = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex")

/**
 * The Idempotency-Key of a run without `--idempotency-key`: derived from what is sent (the photo as prepared, its
 * type, language, weighed total, scenario), to which server and by which payer (a digest of the key, which never
 * leaves), so the same command run again replays the saved result instead of paying twice (an answer lost to a
 * dropped connection included).
 */
const replayKey = (parts: ReadonlyArray<string>, photo: Uint8Array) => `morsel-cli-${sha256([...parts, sha256(photo)].join("\n")).slice(0, 40)}`

/** The key to try once the saved result under `key` has expired (410): the same for every run, so reruns still replay. */
const nextKey = (key: string) => `morsel-cli-${sha256(`${key}\nexpired`).slice(0, 40)}`

/** Expired results (one a day of reruns) stepped over before the command gives up and asks for a key. */
const MAX_EXPIRED_STEPS = 30

/** An analysis under a derived key: an expired result (410) steps to the next key of the chain, a fresh analysis. */
const analyzeReplaying = async (client: MorselClient, photo: Uint8Array, given: AnalyzeOptions, first: string): Promise<AnalysisResult> => {
  let key = first
  for (let step = 0; ; step++) {
    try {
      return await client.analyze(photo, { ...given, idempotencyKey: key })
    } catch (error) {
      if (!(error instanceof MorselError && error.status === 410 && step < MAX_EXPIRED_STEPS)) throw error
      key = nextKey(key)
    }
  }
}

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
      if (error instanceof MorselError && error.code === "price_refused") return Effect.fail(priceFailure(failure, error))
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
    maxPrice: Options.text("max-price").pipe(
      Options.optional,
      Options.withDescription("the most a --wallet-key pays for one analysis, in USDC (default 0.01, the service's price)")
    ),
    idempotencyKey: Options.text("idempotency-key").pipe(
      Options.optional,
      Options.withDescription("choose the key (default: derived from the photo, options and payer, so a rerun replays)")
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
        if (Option.isSome(options.maxPrice) && unitsOf(options.maxPrice.value) === undefined) {
          return yield* new CliFailure({ code: "usage", message: `--max-price must be a price in USDC such as 0.05 (more than 0, at most 6 decimals), not ${JSON.stringify(options.maxPrice.value)}` })
        }
        // payment_pending is left to `--resume`, so the command never waits a minute on its own.
        client = yield* clientOf(options.baseUrl, {
          ...paid,
          paymentPendingRetries: 0,
          ...Option.match(options.scenario, { onNone: () => ({}), onSome: (scenario) => ({ scenario }) }),
          ...Option.match(options.maxPrice, { onNone: () => ({}), onSome: (maxPricePerAnalysis) => ({ maxPricePerAnalysis }) })
        })
        const photo = yield* Effect.tryPromise({ try: () => client.preparePhoto(photoPath), catch: (error) => cliFailureOf(baseUrlOf(options.baseUrl), error) })
        if (photo.change !== undefined) yield* Console.error(photo.change)
        const given = {
          language: options.language,
          ...Option.match(options.grams, { onNone: () => ({}), onSome: (grams) => ({ knownTotalGrams: grams }) })
        }
        const payer = "apiKey" in paid ? `key ${sha256(paid.apiKey ?? "")}` : `wallet ${sha256((paid.walletPrivateKey ?? "").toLowerCase())}`
        const scenario = Option.getOrElse(options.scenario, () => "")
        const parts = [client.baseUrl, payer, scenario, photo.mime, given.language, String(given.knownTotalGrams ?? "")]
        const run = Option.match(options.idempotencyKey, {
          onNone: () => () => analyzeReplaying(client, photo.bytes, given, replayKey(parts, photo.bytes)),
          onSome: (idempotencyKey) => () => client.analyze(photo.bytes, { ...given, idempotencyKey })
        })
        result = yield* finish(client, run, "apiKey" in paid)
      }
      const { receipt, ...body } = result
      yield* printResult(body, options.json)
      if (!options.json) yield* printMore(client, result)
      if (receipt !== undefined) yield* Console.error(describeReceipt(receipt, Option.getOrUndefined(options.maxPrice)))
    }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("Analyze a food photo, paid with card credits (--key) or over x402 (--wallet-key)"))
