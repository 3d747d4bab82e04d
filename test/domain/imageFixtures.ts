// Images for the image checks: real ones drawn with sharp, hand-made PNG chunks and JPEG segments, and assertions on the verdict.
import { Either } from "effect"
import sharp from "sharp"
import { expect } from "vitest"
import { type ImageMime, type ImageRejection, type ImageRejectionReason, type InspectedImage, inspectImage } from "../../src/domain/image.ts"

export const canvas = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: { r: 200, g: 120, b: 40 } } })

export const pngOf = (width: number, height: number): Promise<Buffer> => canvas(width, height).png().toBuffer()
export const jpegOf = (width: number, height: number): Promise<Buffer> => canvas(width, height).jpeg().toBuffer()

export const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64")

export const accepted = (imageBase64: string, mime: ImageMime): InspectedImage => {
  const result = inspectImage(imageBase64, mime)
  if (Either.isLeft(result)) throw new Error(`expected acceptance, got ${result.left.reason}: ${result.left.message}`)
  return result.right
}

export const rejected = (imageBase64: string, mime: ImageMime): ImageRejection => {
  const result = inspectImage(imageBase64, mime)
  if (Either.isRight(result)) throw new Error(`expected rejection, got ${result.right.width}x${result.right.height}`)
  return result.left
}

export const expectRejected = (imageBase64: string, mime: ImageMime, reason: ImageRejectionReason): ImageRejection => {
  const rejection = rejected(imageBase64, mime)
  expect(rejection.reason).toBe(reason)
  expect(rejection.status).toBe(reason === "image_too_large" ? 413 : 400)
  expect(rejection.message.length).toBeGreaterThan(10)
  return rejection
}

/** Index of the first `FF <marker>` pair at or after offset 2, or -1. */
export const markerIndex = (bytes: Uint8Array, marker: number): number => {
  for (let i = 2; i + 1 < bytes.length; i++) if (bytes[i] === 0xff && bytes[i + 1] === marker) return i
  return -1
}

/** `bytes` followed by zeros up to `size` bytes (headers are untouched, so the image stays inspectable). */
export const padTo = (bytes: Uint8Array, size: number): Buffer => {
  const out = Buffer.alloc(size)
  out.set(bytes)
  return out
}

export const PNG_SIG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]

export const u32be = (n: number): Array<number> => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]

/** A PNG chunk; the CRC is left as zeros because the parser does not check it. */
export const pngChunk = (type: string, data: ReadonlyArray<number>): Array<number> => [
  ...u32be(data.length),
  ...Array.from(type, (c) => c.charCodeAt(0)),
  ...data,
  0,
  0,
  0,
  0,
]

export const ihdr = (width: number, height: number): Array<number> =>
  pngChunk("IHDR", [...u32be(width), ...u32be(height), 8, 2, 0, 0, 0])

export const handPng = (...chunks: ReadonlyArray<ReadonlyArray<number>>): Uint8Array =>
  Uint8Array.from([...PNG_SIG, ...chunks.flat()])

export const SOI = [0xff, 0xd8]

/** A JPEG marker segment with a length field (the length counts itself). */
export const seg = (marker: number, payload: ReadonlyArray<number>): Array<number> => [
  0xff,
  marker,
  ((payload.length + 2) >> 8) & 0xff,
  (payload.length + 2) & 0xff,
  ...payload,
]

export const sof = (marker: number, width: number, height: number, components = 3): Array<number> =>
  seg(marker, [
    8,
    (height >> 8) & 0xff,
    height & 0xff,
    (width >> 8) & 0xff,
    width & 0xff,
    components,
    ...Array.from({ length: components }, (_, i) => [i + 1, 0x11, 0]).flat(),
  ])

export const SOS = seg(0xda, [1, 1, 0, 0, 0x3f, 0])
export const APP0 = seg(0xe0, [0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0])

export const handJpeg = (...parts: ReadonlyArray<ReadonlyArray<number>>): Uint8Array => Uint8Array.from([...SOI, ...parts.flat()])

export const SOF_MARKERS = [0xc0, 0xc1, 0xc2, 0xc3, 0xc5, 0xc6, 0xc7, 0xc9, 0xca, 0xcb, 0xcd, 0xce, 0xcf]
