// Validates an uploaded food photo (strict base64 → size → PNG/JPEG magic → declared mime → header dimensions) without ever decoding pixels.
import { Either } from "effect"

export type ImageMime = "image/jpeg" | "image/png"

export interface InspectedImage {
  readonly bytes: Uint8Array
  readonly width: number
  readonly height: number
  readonly mime: ImageMime
}

export type ImageRejectionReason =
  | "invalid_base64"
  | "image_too_large"
  | "unsupported_image"
  | "mime_mismatch"
  | "corrupt_image"
  | "image_dimensions"

export interface ImageRejection {
  readonly reason: ImageRejectionReason
  readonly status: 400 | 413
  readonly message: string
}

export const IMAGE_LIMITS = {
  /** ceil(maxBytes / 3) * 4: the longest padded base64 string that can still decode to ≤ maxBytes. */
  maxBase64Length: 2_666_668,
  maxBytes: 2_000_000,
  minSide: 16,
  maxSide: 2048,
} as const

type ImageFormat = "png" | "jpeg"

interface ImageSize {
  readonly format: ImageFormat
  readonly width: number
  readonly height: number
}

const MIME_FORMAT: Record<ImageMime, ImageFormat> = { "image/jpeg": "jpeg", "image/png": "png" }
const FORMAT_NAME: Record<ImageFormat, string> = { jpeg: "JPEG", png: "PNG" }

/** 2666668 → "2,666,668" (locale-independent). */
/** What to do about a photo too large, said with every refusal of one. */
export const SHRINK_PHOTO =
  "send the photo upright, at most 2048 px a side, as a JPEG of at most 2,000,000 bytes (morsel analyze and morsel/client prepare one so)"

const fmt = (n: number): string => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",")

const reject = (reason: ImageRejectionReason, message: string): Either.Either<InspectedImage, ImageRejection> =>
  Either.left({ reason, status: reason === "image_too_large" ? 413 : 400, message })

// ---------------------------------------------------------------------------
// base64
// ---------------------------------------------------------------------------

// Anchored, one unambiguous character class (it excludes '=') followed by at most two '=':
// V8 matches or fails this in a single linear pass, even on a multi-megabyte string.
const STRICT_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** Explains why a string is not strict base64 (STRICT_BASE64 and a length that is a multiple of 4). */
const base64Problem = (s: string): string => {
  if (s.length === 0) return "image_base64 is empty; send the image bytes as standard base64"
  if (/^\s*data:/i.test(s)) {
    return "image_base64 must be raw base64, not a data: URL; remove the 'data:image/...;base64,' prefix"
  }
  if (/\s/.test(s)) return "image_base64 must not contain whitespace or line breaks"
  if (/[-_]/.test(s)) {
    return "image_base64 must use the standard base64 alphabet ('+' and '/'), not the URL-safe alphabet ('-' and '_')"
  }
  if (/[^A-Za-z0-9+/=]/.test(s)) {
    return "image_base64 contains a character outside the standard base64 alphabet (A-Z, a-z, 0-9, '+', '/', '=')"
  }
  if (!STRICT_BASE64.test(s)) return "image_base64 has '=' padding before the end or more than two '=' characters"
  return `image_base64 is ${fmt(s.length)} characters long; standard padded base64 is always a multiple of 4 characters`
}

/**
 * Whether `s`, which Node decoded leniently into `decoded`, is strict base64 (non-empty, STRICT_BASE64, a length that
 * is a multiple of 4), told without a regular expression over megabytes. Node skips characters outside its alphabet
 * and does not decode past a '=' before the end: in a string whose length is a multiple of 4, any such character
 * leaves fewer bytes than its length and final padding promise. Only the URL-safe '-' and '_', which Node accepts,
 * need a search of their own.
 */
const decodedStrictly = (s: string, decoded: Uint8Array): boolean => {
  if (s.length === 0 || s.length % 4 !== 0) return false
  const padding = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0
  return decoded.length === (s.length / 4) * 3 - padding && !s.includes("-") && !s.includes("_")
}

/** Exact decoded byte count of a string that passed decodedStrictly. */
const decodedLength = (s: string): number => {
  const padding = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0
  return (s.length / 4) * 3 - padding
}

// ---------------------------------------------------------------------------
// header parsing
// ---------------------------------------------------------------------------
// Hand-written on purpose: image-size (the usual package) reads only baseline, extended and progressive SOF
// markers, no chunk but Apple's CgBI before IHDR, resynchronises on garbage instead of refusing it, and reads
// through a DataView over the whole backing buffer, so a truncated upload taken from a pooled Buffer can yield
// dimensions from bytes that are not the image's. These walkers refuse all of that and stay bounds-checked.

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] as const
const JPEG_SIGNATURE = [0xff, 0xd8, 0xff] as const

const startsWith = (bytes: Uint8Array, signature: ReadonlyArray<number>): boolean =>
  bytes.length >= signature.length && signature.every((b, i) => bytes[i] === b)

const detectFormat = (bytes: Uint8Array): ImageFormat | undefined =>
  startsWith(bytes, PNG_SIGNATURE) ? "png" : startsWith(bytes, JPEG_SIGNATURE) ? "jpeg" : undefined

// Callers check `offset + n <= bytes.length` first; `?? 0` only satisfies noUncheckedIndexedAccess.
const u8 = (bytes: Uint8Array, offset: number): number => bytes[offset] ?? 0
const u16 = (bytes: Uint8Array, offset: number): number => u8(bytes, offset) * 0x100 + u8(bytes, offset + 1)
const u32 = (bytes: Uint8Array, offset: number): number => u16(bytes, offset) * 0x1_0000 + u16(bytes, offset + 2)

const isAsciiLetter = (b: number): boolean => (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a)

const PNG_MAX_CHUNK_LENGTH = 0x7fff_ffff
const IHDR = "IHDR"

/**
 * Walks PNG chunks from offset 8 until IHDR. Chunks before IHDR (e.g. Apple's CgBI) are skipped by
 * their declared length; the offset grows by at least 12 per chunk, so the walk always terminates.
 */
const readPngSize = (bytes: Uint8Array): ImageSize | undefined => {
  let offset: number = PNG_SIGNATURE.length
  while (offset + 8 <= bytes.length) {
    const length = u32(bytes, offset)
    if (length > PNG_MAX_CHUNK_LENGTH) return undefined
    let type = ""
    for (let i = 4; i < 8; i++) {
      const b = u8(bytes, offset + i)
      if (!isAsciiLetter(b)) return undefined
      type += String.fromCharCode(b)
    }
    const end = offset + 12 + length // length + type + data + CRC (CRC is not checked)
    if (end > bytes.length) return undefined
    if (type === IHDR) {
      if (length !== 13) return undefined
      const width = u32(bytes, offset + 8)
      const height = u32(bytes, offset + 12)
      return width === 0 || height === 0 ? undefined : { format: "png", width, height }
    }
    // Image data or the end marker before IHDR: there is no header to find.
    if (type === "IDAT" || type === "IEND") return undefined
    offset = end
  }
  return undefined
}

/** Start-of-frame markers: every frame type (baseline … lossless, Huffman or arithmetic), minus DHT (C4), JPG (C8), DAC (CC). */
const isSofMarker = (m: number): boolean => m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc

/** Markers without a length field: TEM, RST0-7, SOI. */
const isStandaloneMarker = (m: number): boolean => m === 0x01 || (m >= 0xd0 && m <= 0xd8)

const JPEG_SOS = 0xda
const JPEG_EOI = 0xd9

/**
 * Walks JPEG markers from offset 2 until the first SOF segment. Every step advances by at least one
 * byte and every read is bounds-checked; anything unexpected (missing 0xFF, truncation, SOS/EOI before
 * SOF, a malformed SOF, DNL-deferred height 0) yields undefined.
 */
const readJpegSize = (bytes: Uint8Array): ImageSize | undefined => {
  let offset = 2
  while (offset < bytes.length) {
    if (u8(bytes, offset) !== 0xff) return undefined
    while (offset < bytes.length && u8(bytes, offset) === 0xff) offset++ // marker prefix + fill bytes
    if (offset >= bytes.length) return undefined
    const marker = u8(bytes, offset)
    offset++
    if (isStandaloneMarker(marker)) continue
    if (marker === 0x00 || marker === JPEG_SOS || marker === JPEG_EOI) return undefined
    if (offset + 2 > bytes.length) return undefined
    const length = u16(bytes, offset) // includes the two length bytes themselves
    if (length < 2 || offset + length > bytes.length) return undefined
    if (isSofMarker(marker)) {
      // length(2) precision(1) height(2) width(2) components(1), then 3 bytes per component
      if (length < 8) return undefined
      const height = u16(bytes, offset + 3)
      const width = u16(bytes, offset + 5)
      const components = u8(bytes, offset + 7)
      if (components === 0 || length !== 8 + 3 * components) return undefined
      return width === 0 || height === 0 ? undefined : { format: "jpeg", width, height }
    }
    offset += length
  }
  return undefined
}

/**
 * Reads format and pixel dimensions from PNG/JPEG headers without decoding pixels. Returns undefined
 * for anything that is not a PNG/JPEG or whose header is truncated or malformed; never throws.
 */
export const readImageSize = (
  bytes: Uint8Array,
): { format: "png" | "jpeg"; width: number; height: number } | undefined => {
  const format = detectFormat(bytes)
  if (format === undefined) return undefined
  const size = format === "png" ? readPngSize(bytes) : readJpegSize(bytes)
  return size === undefined ? undefined : { format: size.format, width: size.width, height: size.height }
}

// ---------------------------------------------------------------------------
// inspectImage
// ---------------------------------------------------------------------------

const sideProblems = (width: number, height: number): ReadonlyArray<string> => {
  const { minSide, maxSide } = IMAGE_LIMITS
  const out: Array<string> = []
  if (width < minSide || width > maxSide) out.push(`${width} px wide`)
  if (height < minSide || height > maxSide) out.push(`${height} px tall`)
  return out
}

/**
 * Validates a base64 image against the upload rules, in order: string length (413), strict base64,
 * decoded size (413), PNG/JPEG magic bytes, declared mime, header dimensions.
 */
export const inspectImage = (
  imageBase64: string,
  mime: ImageMime,
): Either.Either<InspectedImage, ImageRejection> => {
  const { maxBase64Length, maxBytes, minSide, maxSide } = IMAGE_LIMITS

  if (imageBase64.length > maxBase64Length) {
    return reject(
      "image_too_large",
      `image_base64 is ${fmt(imageBase64.length)} characters; the limit is ${fmt(maxBase64Length)} characters (${fmt(maxBytes)} bytes decoded): ${SHRINK_PHOTO}`,
    )
  }

  const decoded = Buffer.from(imageBase64, "base64")
  if (!decodedStrictly(imageBase64, decoded)) return reject("invalid_base64", base64Problem(imageBase64))

  const size = decodedLength(imageBase64)
  if (size > maxBytes) {
    return reject("image_too_large", `image is ${fmt(size)} bytes decoded; the limit is ${fmt(maxBytes)} bytes: ${SHRINK_PHOTO}`)
  }

  const bytes: Uint8Array = decoded
  const format = detectFormat(bytes)
  if (format === undefined) {
    return reject("unsupported_image", "image bytes are neither PNG nor JPEG; only image/png and image/jpeg are accepted")
  }

  if (MIME_FORMAT[mime] !== format) {
    return reject("mime_mismatch", `image bytes are ${FORMAT_NAME[format]} but mime is ${mime}`)
  }

  const dims = format === "png" ? readPngSize(bytes) : readJpegSize(bytes)
  if (dims === undefined) {
    return reject(
      "corrupt_image",
      `image is not a readable ${FORMAT_NAME[format]}: its header is truncated or malformed and no dimensions were found`,
    )
  }

  const problems = sideProblems(dims.width, dims.height)
  if (problems.length > 0) {
    return reject(
      "image_dimensions",
      `image is ${problems.join(" and ")}; each side must be ${minSide} to ${maxSide} px`,
    )
  }

  return Either.right({ bytes, width: dims.width, height: dims.height, mime })
}
