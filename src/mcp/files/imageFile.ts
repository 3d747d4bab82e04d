/**
 * `image_file`: a photo handed to analyze_food as a file reference (ChatGPT's file parameters,
 * `_meta["openai/fileParams"]`: `{ download_url, file_id }`) instead of `image_base64`. The photo is downloaded
 * (see download.ts) and the call goes on exactly as if its bytes had come as base64, so the same photo is the same
 * input for idempotency and replays whichever way it came.
 */
import { Effect, Either, Schema } from "effect"
import { InvalidRequest, PayloadTooLarge, schemaRejection, TooManyRequests } from "../../domain/errors.ts"
import { IMAGE_LIMITS } from "../../domain/image.ts"
import { DownloadRefused, download } from "./download.ts"
import type { FileSettings } from "./settings.ts"

export const FILE_ARGUMENT = "image_file"

/** The tool's declared shape of the argument (OpenAI Apps SDK: an object `{ download_url, file_id }`). */
export const imageFileJsonSchema = {
  type: "object" as const,
  description:
    'The photo as a file the user attached in the chat (hosts with file parameters, such as ChatGPT, fill this in). Give either image_file or image_base64 with mime_type, never both. The file is downloaded over https from a public address (at most 2,000,000 bytes, JPEG or PNG); its format is read from its bytes.',
  properties: {
    download_url: { type: "string", description: "An https link to the file's bytes" },
    file_id: { type: "string", description: "The host's identifier of the file" }
  },
  required: ["download_url", "file_id"]
}

const ImageFile = Schema.Struct({
  download_url: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4096)),
  file_id: Schema.optional(Schema.String.pipe(Schema.maxLength(512)))
})

/** How many photos one instance fetches at once; a call beyond them is refused at once, not queued. */
export const MAX_CONCURRENT_DOWNLOADS = 4

/**
 * Runs downloads at most MAX_CONCURRENT_DOWNLOADS at a time (one per instance): a call beyond them gets 429
 * `capacity_limited` without waiting, so no burst of calls can hold the server's outbound connections.
 */
export const downloadGate = (max = MAX_CONCURRENT_DOWNLOADS) => {
  let running = 0
  const busy = new TooManyRequests({
    error: {
      code: "capacity_limited",
      message: `this server is already fetching ${max} photos; retry in a moment, or send the photo as image_base64 with mime_type`
    }
  })
  return <A, E, R>(fetch: Effect.Effect<A, E, R>): Effect.Effect<A, E | TooManyRequests, R> =>
    Effect.suspend((): Effect.Effect<A, E | TooManyRequests, R> => {
      if (running >= max) return Effect.fail(busy)
      running++
      return Effect.ensuring(fetch, Effect.sync(() => running--))
    })
}

const refusal = (path: ReadonlyArray<string>, message: string) => schemaRejection([{ path, message }], message)

/** A refusal with an image error code of its own, naming the argument as schema refusals do. */
const imageRefusal = (code: "unsupported_image" | "mime_mismatch", path: ReadonlyArray<string>, message: string) =>
  new InvalidRequest({ error: { code, message: `${path.join(".")}: ${message}`, issues: [{ path, message }] } })

/** JPEG or PNG, from the first bytes; anything else is not a photo this service reads. */
const formatOf = (bytes: Buffer): "image/jpeg" | "image/png" | undefined => {
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return "image/jpeg"
  if (bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return "image/png"
  return undefined
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** Whether the call gives its photo as a file reference. */
export const hasImageFile = (args: unknown): args is Record<string, unknown> => isRecord(args) && Object.hasOwn(args, FILE_ARGUMENT)

/** A file reference and the other arguments, once the reference's shape holds (nothing fetched yet). */
const readReference = (args: Record<string, unknown>) =>
  Effect.gen(function* () {
    const { [FILE_ARGUMENT]: reference, ...rest } = args
    if (Object.hasOwn(rest, "image_base64"))
      return yield* refusal(["image_base64"], "give either image_base64 (with mime_type) or image_file, not both")
    const decoded = Schema.decodeUnknownEither(ImageFile)(reference)
    if (Either.isLeft(decoded))
      return yield* refusal([FILE_ARGUMENT], "must be an object with download_url (an https link) and file_id")
    return { reference: decoded.right, rest }
  })

/**
 * The arguments with the file reference standing for a photo not yet fetched (a JPEG's first bytes), once the
 * reference's shape holds: every other argument can be checked before anything is downloaded.
 */
export const withPhotoNotFetched = (args: Record<string, unknown>): Effect.Effect<Record<string, unknown>, InvalidRequest> =>
  Effect.map(readReference(args), ({ rest }) => ({ mime_type: "image/jpeg", ...rest, image_base64: "/9j/4A==" }))

/**
 * The arguments with `image_file` replaced by the downloaded photo's `image_base64` and `mime_type`; arguments
 * without it are returned as they came. Every refusal names the argument and happens before anything is charged.
 */
export const withDownloadedImage = (
  args: unknown,
  settings: FileSettings
): Effect.Effect<unknown, InvalidRequest | PayloadTooLarge> =>
  Effect.gen(function* () {
    if (!hasImageFile(args)) return args
    const { reference, rest } = yield* readReference(args)
    const where = [FILE_ARGUMENT, "download_url"]
    const bytes = yield* Effect.tryPromise({
      try: (signal) => download(reference.download_url, settings, IMAGE_LIMITS.maxBytes, signal),
      catch: (error) =>
        error instanceof DownloadRefused && error.tooLarge
          ? new PayloadTooLarge({ error: { code: "image_too_large", message: `${where.join(".")}: ${error.message}` } })
          : refusal(where, error instanceof DownloadRefused ? error.message : "the download failed")
    }).pipe(
      Effect.timeoutFail({
        duration: settings.timeoutMs,
        onTimeout: () => refusal(where, `the download did not finish within ${settings.timeoutMs} ms`)
      })
    )
    const format = formatOf(bytes)
    if (format === undefined) return yield* imageRefusal("unsupported_image", [FILE_ARGUMENT], "the file is not a JPEG or PNG photo")
    if (Object.hasOwn(rest, "mime_type") && rest["mime_type"] !== format)
      return yield* imageRefusal("mime_mismatch", ["mime_type"], `the file in image_file is ${format}; leave mime_type out or give ${format}`)
    return { ...rest, image_base64: bytes.toString("base64"), mime_type: format }
  })
