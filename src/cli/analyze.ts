/** `morsel analyze`: sends a food photo to a running server, paid with card credits or per call over x402. */
import { randomUUID } from "node:crypto"
import { readFile } from "node:fs/promises"
import { Args, Command, Options } from "@effect/cli"
import { FetchHttpClient } from "@effect/platform"
import { Console, Effect, Option, Redacted } from "effect"
import { withProgress } from "../terminal.ts"
import { baseUrlOf, baseUrlOption, bearer, CliFailure, jsonOption, keyOf, keyOption, parseJson, reportFailure, request } from "./client.ts"
import { printResult } from "./output.ts"

/** JPEG or PNG from the magic bytes; the server checks them again. */
const mimeOf = (bytes: Buffer): Option.Option<"image/jpeg" | "image/png"> =>
  bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff
    ? Option.some("image/jpeg")
    : bytes.subarray(0, 4).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47]))
      ? Option.some("image/png")
      : Option.none()

/**
 * The transport under the HTTP client when a wallet pays: it answers x402 challenges from the wallet and remembers
 * each signed payment, so a payment_pending answer can be retried with the very same one. Loaded only when used.
 */
const payingFetch = (walletKey: Redacted.Redacted, sentSignatures: Array<string>) =>
  Effect.tryPromise({
    try: async () => {
      const { wrapFetchWithPayment, x402Client } = await import("@x402/fetch")
      const { ExactEvmScheme } = await import("@x402/evm/exact/client")
      const { privateKeyToAccount } = await import("viem/accounts")
      const account = privateKeyToAccount(Redacted.value(walletKey) as `0x${string}`)
      const transport = globalThis.fetch
      const recording: typeof fetch = (input, init) => {
        const signature = new Headers(input instanceof Request ? input.headers : init?.headers).get("payment-signature")
        if (signature !== null) sentSignatures.push(signature)
        return transport(input, init)
      }
      return wrapFetchWithPayment(recording, new x402Client().register("eip155:*", new ExactEvmScheme(account)))
    },
    catch: (cause) => new CliFailure({ message: `cannot pay with x402 here: ${cause instanceof Error ? cause.message : String(cause)}` })
  })

const decodeReceipt = (header: string | undefined): unknown =>
  header === undefined ? undefined : parseJson(Buffer.from(header, "base64").toString("utf8"))

export const analyze = Command.make(
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
      let transport: typeof fetch = globalThis.fetch
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
        transport = yield* payingFetch(walletKey.value, sentSignatures)
      } else {
        return yield* new CliFailure({ message: "give --key (card credits) or --wallet-key (x402), or set MORSEL_API_KEY" })
      }
      const reply = yield* request(url, { method: "POST", headers, body }).pipe(
        Effect.provideService(FetchHttpClient.Fetch, transport),
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
      const receipt = decodeReceipt(reply.response.headers["payment-response"])
      if (receipt !== undefined) yield* Console.error(`x402 receipt: ${JSON.stringify(receipt)}`)
      yield* printResult(reply.body, options.json)
    }).pipe(reportFailure)
).pipe(Command.withDescription("Analyze a food photo on a running server, paid with card credits (--key) or per call over x402 (--wallet-key)"))
