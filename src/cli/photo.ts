/** Turns any photo a phone or camera makes into one the API takes: upright, at most 2048 px a side, JPEG or PNG, at most 2 MB. */
import { readFile, stat } from "node:fs/promises"
import { basename } from "node:path"
import { Effect } from "effect"
import type { Sharp } from "sharp"
import { IMAGE_LIMITS } from "../domain/image.ts"
import { CliFailure } from "./client.ts"

/** Far beyond any photo: such a file is refused before it is read. */
export const MAX_PHOTO_FILE_BYTES = 50_000_000

/** sharp's default `limitInputPixels` (0x3FFF × 0x3FFF). */
const MAX_PHOTO_PIXELS = 0x3fff * 0x3fff

export interface PreparedPhoto {
  readonly bytes: Buffer
  readonly mime: "image/jpeg" | "image/png"
  /** What was done to it, for one line on stderr; absent when the file is sent as it is. */
  readonly change: string | undefined
}

/** 3_400_000 → "3.4 MB" (decimal megabytes, as the API's 2 MB limit counts them). */
export const megabytes = (bytes: number) => `${(bytes / 1_000_000).toFixed(1)} MB`

const FORMAT_NAMES: Readonly<Record<string, string>> = { jpeg: "JPEG", png: "PNG", webp: "WebP", heif: "HEIF", gif: "GIF", tiff: "TIFF" }
const formatName = (format: string | undefined) => (format === undefined ? "image" : (FORMAT_NAMES[format] ?? format.toUpperCase()))

// ISO base media brands of HEIC/HEIF photos (iPhones), which the bundled image library cannot decode (HEVC).
const HEIC_BRANDS = new Set(["heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1"])
const isHeic = (bytes: Buffer) => bytes.subarray(4, 8).toString("latin1") === "ftyp" && HEIC_BRANDS.has(bytes.subarray(8, 12).toString("latin1"))

const heicFailure = (name: string) =>
  new CliFailure({
    code: "photo_unreadable",
    message: `${name} is a HEIC photo, which morsel cannot read: export it as JPEG (on an iPhone, Settings → Camera → Formats → Most Compatible)`
  })

const readWhole = (path: string) =>
  Effect.tryPromise({
    try: () => readFile(path),
    catch: (cause) => new CliFailure({ code: "photo_unreadable", message: `cannot read ${path}: ${cause instanceof Error ? cause.message : String(cause)}` })
  })

/** JPEG at falling quality until it fits the byte limit (a 2048 px photo fits at the first or second try). */
const encodeJpeg = async (image: Sharp) => {
  for (const quality of [85, 75, 65, 50]) {
    const bytes = await image.clone().jpeg({ quality, mozjpeg: true }).toBuffer({ resolveWithObject: true })
    if (bytes.data.length <= IMAGE_LIMITS.maxBytes) return bytes
  }
  return image.clone().resize({ width: 1024, height: 1024, fit: "inside" }).jpeg({ quality: 60, mozjpeg: true }).toBuffer({ resolveWithObject: true })
}

/** The photo at `path` as the API takes it, re-encoded only when it must be. */
export const preparePhoto = (path: string): Effect.Effect<PreparedPhoto, CliFailure> =>
  Effect.gen(function* () {
    const name = basename(path)
    const size = yield* Effect.tryPromise({
      try: () => stat(path),
      catch: () => new CliFailure({ code: "photo_unreadable", message: `cannot read ${path}: no such file` })
    })
    if (size.size > MAX_PHOTO_FILE_BYTES) {
      return yield* new CliFailure({
        code: "photo_too_large",
        message: `${name} is ${megabytes(size.size)}, larger than any photo (at most ${megabytes(MAX_PHOTO_FILE_BYTES)}): choose the photo itself`
      })
    }
    const original = yield* readWhole(path)
    // Loaded here, not with the command line: every other command, `serve` included, starts without libvips.
    const { default: sharp } = yield* Effect.promise(() => import("sharp"))
    const unreadable = () =>
      isHeic(original) ? heicFailure(name) : new CliFailure({ code: "photo_unreadable", message: `${name} is not a photo morsel can read (JPEG, PNG or WebP)` })
    // Read without the pixel guard, so a too-large image is named as such below (nothing is decoded here).
    const meta = yield* Effect.tryPromise({ try: () => sharp(original, { limitInputPixels: false }).metadata(), catch: unreadable })
    if (meta.format === "heif" && meta.compression === "hevc") return yield* heicFailure(name)
    const upright = meta.orientation === undefined || meta.orientation === 1
    // Turned sides count: a portrait photo stored sideways is as tall after turning as its width before.
    const [width, height] = (meta.orientation ?? 1) >= 5 ? [meta.height, meta.width] : [meta.width, meta.height]
    if (Math.min(width, height) < IMAGE_LIMITS.minSide) {
      return yield* new CliFailure({
        code: "photo_too_small",
        message: `${name} is ${width}×${height}: a photo needs at least ${IMAGE_LIMITS.minSide} pixels a side`
      })
    }
    // The image library's own guard against decompression bombs; a 200-megapixel phone photo stays below it.
    if (width * height > MAX_PHOTO_PIXELS) {
      return yield* new CliFailure({
        code: "photo_too_large",
        message: `${name} is ${width}×${height} pixels, more than any photo (at most ${Math.floor(MAX_PHOTO_PIXELS / 1_000_000)} million pixels)`
      })
    }
    const sendable = meta.format === "jpeg" || meta.format === "png"
    const fits = Math.max(width, height) <= IMAGE_LIMITS.maxSide && original.length <= IMAGE_LIMITS.maxBytes
    if (sendable && fits && upright) {
      return { bytes: original, mime: meta.format === "png" ? "image/png" : "image/jpeg", change: undefined }
    }
    const shrunk = sharp(original, { failOn: "none" })
      .rotate()
      .resize({ width: IMAGE_LIMITS.maxSide, height: IMAGE_LIMITS.maxSide, fit: "inside", withoutEnlargement: true })
      .flatten({ background: "#ffffff" })
    const encoded = yield* Effect.tryPromise({ try: () => encodeJpeg(shrunk), catch: unreadable })
    const turned = upright ? "" : ", turned upright"
    return {
      bytes: encoded.data,
      mime: "image/jpeg",
      change: `${name}: ${width}×${height} ${formatName(meta.format)} ${megabytes(original.length)} → ${encoded.info.width}×${encoded.info.height} JPEG ${megabytes(encoded.data.length)}${turned}`
    }
  })
