/** Turns any photo a phone or camera makes into one the API takes, in Node with sharp: upright, at most 2048 px a side, JPEG or PNG, at most 2 MB. */
import { readFile, stat } from "node:fs/promises"
import { basename } from "node:path"
import type { Sharp } from "sharp"
import type { Photo } from "./core.ts"
import { MorselError } from "./errors.ts"
import { IMAGE_LIMITS, megabytes } from "./limits.ts"
import type { PreparedPhoto } from "./types.ts"

/** Far beyond any photo: such a file is refused before it is read. */
export const MAX_PHOTO_FILE_BYTES = 50_000_000

/** sharp's default `limitInputPixels` (0x3FFF × 0x3FFF). */
const MAX_PHOTO_PIXELS = 0x3fff * 0x3fff

const FORMAT_NAMES: Readonly<Record<string, string>> = { jpeg: "JPEG", png: "PNG", webp: "WebP", heif: "HEIF", gif: "GIF", tiff: "TIFF" }
const formatName = (format: string | undefined) => (format === undefined ? "image" : (FORMAT_NAMES[format] ?? format.toUpperCase()))

// ISO base media brands of HEIC/HEIF photos (iPhones), which the bundled image library cannot decode (HEVC).
const HEIC_BRANDS = new Set(["heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1"])
const isHeic = (bytes: Buffer) => bytes.subarray(4, 8).toString("latin1") === "ftyp" && HEIC_BRANDS.has(bytes.subarray(8, 12).toString("latin1"))

const failure = (code: string, message: string, cause?: unknown) => new MorselError({ code, message, cause })

const heicFailure = (name: string) =>
  failure("photo_unreadable", `${name} is a HEIC photo, which morsel cannot read: export it as JPEG (on an iPhone, Settings → Camera → Formats → Most Compatible)`)

/** JPEG at falling quality until it fits the byte limit (a 2048 px photo fits at the first or second try). */
const encodeJpeg = async (image: Sharp) => {
  for (const quality of [85, 75, 65, 50]) {
    const bytes = await image.clone().jpeg({ quality, mozjpeg: true }).toBuffer({ resolveWithObject: true })
    if (bytes.data.length <= IMAGE_LIMITS.maxBytes) return bytes
  }
  return image.clone().resize({ width: 1024, height: 1024, fit: "inside" }).jpeg({ quality: 60, mozjpeg: true }).toBuffer({ resolveWithObject: true })
}

const tooLarge = (name: string, bytes: number) =>
  failure("photo_too_large", `${name} is ${megabytes(bytes)}, larger than any photo (at most ${megabytes(MAX_PHOTO_FILE_BYTES)}): choose the photo itself`)

/** The photo's bytes and the name its messages use: the file's name, a File's name, else "the photo". */
const read = async (photo: Photo): Promise<{ readonly name: string; readonly original: Buffer }> => {
  if (typeof photo === "string") {
    const size = await stat(photo).catch((cause: unknown) => {
      throw failure("photo_unreadable", `cannot read ${photo}: no such file`, cause)
    })
    if (size.size > MAX_PHOTO_FILE_BYTES) throw tooLarge(basename(photo), size.size)
    const original = await readFile(photo).catch((cause: unknown) => {
      throw failure("photo_unreadable", `cannot read ${photo}: ${cause instanceof Error ? cause.message : String(cause)}`, cause)
    })
    return { name: basename(photo), original }
  }
  if (photo instanceof Blob) {
    const name = "name" in photo && typeof photo.name === "string" && photo.name !== "" ? photo.name : "the photo"
    if (photo.size > MAX_PHOTO_FILE_BYTES) throw tooLarge(name, photo.size)
    return { name, original: Buffer.from(await photo.arrayBuffer()) }
  }
  const original = photo instanceof ArrayBuffer ? Buffer.from(photo) : Buffer.from(photo.buffer, photo.byteOffset, photo.byteLength)
  if (original.length > MAX_PHOTO_FILE_BYTES) throw tooLarge("the photo", original.length)
  return { name: "the photo", original }
}

/** The photo as the API takes it, re-encoded only when it must be. */
export const preparePhoto = async (photo: Photo): Promise<PreparedPhoto> => {
  const { name, original } = await read(photo)
  // Loaded here: a program that never prepares a photo starts without libvips.
  const { default: sharp } = await import("sharp")
  const unreadable = (cause: unknown) =>
    isHeic(original) ? heicFailure(name) : failure("photo_unreadable", `${name} is not a photo morsel can read (JPEG, PNG or WebP)`, cause)
  // Read without the pixel guard, so a too-large image is named as such below (nothing is decoded here).
  const meta = await sharp(original, { limitInputPixels: false })
    .metadata()
    .catch((cause: unknown) => {
      throw unreadable(cause)
    })
  if (meta.format === "heif" && meta.compression === "hevc") throw heicFailure(name)
  const upright = meta.orientation === undefined || meta.orientation === 1
  // Turned sides count: a portrait photo stored sideways is as tall after turning as its width before.
  const [width, height] = (meta.orientation ?? 1) >= 5 ? [meta.height, meta.width] : [meta.width, meta.height]
  if (Math.min(width, height) < IMAGE_LIMITS.minSide) {
    throw failure("photo_too_small", `${name} is ${width}×${height}: a photo needs at least ${IMAGE_LIMITS.minSide} pixels a side`)
  }
  // The image library's own guard against decompression bombs; a 200-megapixel phone photo stays below it.
  if (width * height > MAX_PHOTO_PIXELS) {
    throw failure(
      "photo_too_large",
      `${name} is ${width}×${height} pixels, more than any photo (at most ${Math.floor(MAX_PHOTO_PIXELS / 1_000_000)} million pixels)`
    )
  }
  const sendable = meta.format === "jpeg" || meta.format === "png"
  const fits = Math.max(width, height) <= IMAGE_LIMITS.maxSide && original.length <= IMAGE_LIMITS.maxBytes
  if (sendable && fits && upright) return { bytes: original, mime: meta.format === "png" ? "image/png" : "image/jpeg", change: undefined }
  const shrunk = sharp(original, { failOn: "none" })
    .rotate()
    .resize({ width: IMAGE_LIMITS.maxSide, height: IMAGE_LIMITS.maxSide, fit: "inside", withoutEnlargement: true })
    .flatten({ background: "#ffffff" })
  const encoded = await encodeJpeg(shrunk).catch((cause: unknown) => {
    throw unreadable(cause)
  })
  const turned = upright ? "" : ", turned upright"
  return {
    bytes: encoded.data,
    mime: "image/jpeg",
    change: `${name}: ${width}×${height} ${formatName(meta.format)} ${megabytes(original.length)} → ${encoded.info.width}×${encoded.info.height} JPEG ${megabytes(encoded.data.length)}${turned}`
  }
}
