// Reading an image's size from its header (PNG chunks, JPEG markers), and hostile or truncated input that must never throw.
import { Either } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { IMAGE_LIMITS, type ImageMime, type ImageRejection, type ImageRejectionReason, type InspectedImage, inspectImage, readImageSize } from "../../src/domain/image.ts"
import {
  APP0,
  b64,
  canvas,
  handJpeg,
  handPng,
  ihdr,
  jpegOf,
  markerIndex,
  PNG_SIG,
  pngChunk,
  pngOf,
  seg,
  sof,
  SOF_MARKERS,
  SOI,
  SOS,
  u32be
} from "./imageFixtures.ts"

describe("readImageSize", () => {
  it("reads real PNG and JPEG headers", async () => {
    expect(readImageSize(await pngOf(17, 1999))).toEqual({ format: "png", width: 17, height: 1999 })
    expect(readImageSize(await jpegOf(1999, 17))).toEqual({ format: "jpeg", width: 1999, height: 17 })
  })

  it("returns undefined for non-images and empty input", async () => {
    expect(readImageSize(new Uint8Array())).toBeUndefined()
    expect(readImageSize(await canvas(20, 20).gif().toBuffer())).toBeUndefined()
  })

  describe("PNG chunk walk", () => {
    it("skips any number of chunks (including empty ones) before IHDR", () => {
      const png = handPng(pngChunk("CgBI", [1, 2, 3, 4]), pngChunk("teXt", []), pngChunk("zzZz", [9]), ihdr(64, 32))
      expect(readImageSize(png)).toEqual({ format: "png", width: 64, height: 32 })
    })

    it("rejects a signature with no chunks, a truncated IHDR and a truncated chunk before IHDR", () => {
      expect(readImageSize(handPng())).toBeUndefined()
      const full = handPng(ihdr(64, 32))
      for (let n = 8; n < full.length; n++) expect(readImageSize(full.subarray(0, n))).toBeUndefined()
      expect(readImageSize(full)).toEqual({ format: "png", width: 64, height: 32 })
    })

    it("rejects IDAT or IEND before IHDR", () => {
      expect(readImageSize(handPng(pngChunk("IDAT", [0]), ihdr(64, 32)))).toBeUndefined()
      expect(readImageSize(handPng(pngChunk("IEND", []), ihdr(64, 32)))).toBeUndefined()
    })

    it("rejects absurd chunk lengths, non-letter chunk types, a wrong IHDR length and zero sides", () => {
      const huge = [...u32be(0xfffffff0), 0x43, 0x67, 0x42, 0x49, 0, 0, 0, 0]
      expect(readImageSize(handPng(huge, ihdr(64, 32)))).toBeUndefined()
      expect(readImageSize(handPng(pngChunk("a1b2", []), ihdr(64, 32)))).toBeUndefined()
      expect(readImageSize(handPng(pngChunk("IHDR", [...u32be(64), ...u32be(32), 8, 2, 0, 0])))).toBeUndefined()
      expect(readImageSize(handPng(ihdr(0, 32)))).toBeUndefined()
      expect(readImageSize(handPng(ihdr(64, 0)))).toBeUndefined()
    })
  })

  describe("JPEG marker walk", () => {
    it("takes dimensions from every SOF variant (baseline, extended, progressive, lossless, arithmetic)", () => {
      for (const marker of SOF_MARKERS) {
        expect(readImageSize(handJpeg(APP0, sof(marker, 300, 200), SOS)), marker.toString(16)).toEqual({
          format: "jpeg",
          width: 300,
          height: 200,
        })
      }
    })

    it("does not read DHT (C4), JPG (C8) or DAC (CC) segments as SOF", () => {
      for (const marker of [0xc4, 0xc8, 0xcc]) {
        // The impostor has a SOF-shaped payload claiming 999x999; the real SOF follows it.
        const impostor = sof(marker, 999, 999)
        expect(readImageSize(handJpeg(impostor, sof(0xc0, 40, 30), SOS)), marker.toString(16)).toEqual({
          format: "jpeg",
          width: 40,
          height: 30,
        })
        expect(readImageSize(handJpeg(impostor, SOS))).toBeUndefined()
      }
    })

    it("skips 0xFF fill bytes before markers", () => {
      const filled = [0xff, 0xff, 0xff, ...APP0, 0xff, 0xff, ...sof(0xc0, 50, 60), ...SOS]
      expect(readImageSize(handJpeg(filled))).toEqual({ format: "jpeg", width: 50, height: 60 })
    })

    it("steps over standalone markers (RST0-7, TEM, SOI) that have no length field", () => {
      const standalone = [0xd0, 0xd1, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0x01, 0xd8].flatMap((m) => [0xff, m])
      expect(readImageSize(handJpeg(standalone, sof(0xc2, 70, 80)))).toEqual({ format: "jpeg", width: 70, height: 80 })
    })

    it("rejects SOS or EOI before any SOF", () => {
      expect(readImageSize(handJpeg(APP0, SOS, sof(0xc0, 50, 60)))).toBeUndefined()
      expect(readImageSize(handJpeg(APP0, [0xff, 0xd9], sof(0xc0, 50, 60)))).toBeUndefined()
    })

    it("rejects a SOF with height 0 (DNL) or width 0", () => {
      expect(readImageSize(handJpeg(sof(0xc0, 50, 0), SOS))).toBeUndefined()
      expect(readImageSize(handJpeg(sof(0xc0, 0, 50), SOS))).toBeUndefined()
    })

    it("rejects malformed segments: short/long lengths, component count mismatch, garbage between segments", () => {
      expect(readImageSize(handJpeg([0xff, 0xe0, 0x00, 0x01], sof(0xc0, 50, 60)))).toBeUndefined()
      expect(readImageSize(handJpeg([0xff, 0xe0, 0xff, 0xff, 1, 2, 3], sof(0xc0, 50, 60)))).toBeUndefined()
      const badSof = sof(0xc0, 50, 60)
      badSof[9] = 4 // claims 4 components but carries 3
      expect(readImageSize(handJpeg(badSof, SOS))).toBeUndefined()
      expect(readImageSize(handJpeg(APP0, [0x00, 0x12], sof(0xc0, 50, 60)))).toBeUndefined()
      expect(readImageSize(handJpeg([0xff, 0x00], sof(0xc0, 50, 60)))).toBeUndefined()
    })

    it("rejects every truncation of a real JPEG (with EXIF/ICC) that cuts into the header", async () => {
      const jpeg = await canvas(120, 90).withMetadata().withIccProfile("srgb").jpeg().toBuffer()
      const sofAt = markerIndex(jpeg, 0xc0)
      const sofEnd = sofAt + 2 + ((jpeg[sofAt + 2] ?? 0) << 8) + (jpeg[sofAt + 3] ?? 0)
      for (let n = 0; n < sofEnd; n++) expect(readImageSize(jpeg.subarray(0, n))).toBeUndefined()
      expect(readImageSize(jpeg.subarray(0, sofEnd))).toEqual({ format: "jpeg", width: 120, height: 90 })
    })
  })
})

describe("robustness: malicious or truncated input never throws", () => {
  const MIMES: ReadonlyArray<ImageMime> = ["image/png", "image/jpeg"]
  const REASONS: ReadonlyArray<ImageRejectionReason> = [
    "invalid_base64",
    "image_too_large",
    "unsupported_image",
    "mime_mismatch",
    "corrupt_image",
    "image_dimensions",
  ]

  const wellFormed = (result: Either.Either<InspectedImage, ImageRejection>): void => {
    if (Either.isLeft(result)) {
      expect(REASONS).toContain(result.left.reason)
      expect(result.left.status).toBe(result.left.reason === "image_too_large" ? 413 : 400)
    } else {
      for (const side of [result.right.width, result.right.height]) {
        expect(side).toBeGreaterThanOrEqual(IMAGE_LIMITS.minSide)
        expect(side).toBeLessThanOrEqual(IMAGE_LIMITS.maxSide)
      }
    }
  }

  const validSize = (size: ReturnType<typeof readImageSize>): void => {
    if (size === undefined) return
    expect(Number.isInteger(size.width) && size.width > 0).toBe(true)
    expect(Number.isInteger(size.height) && size.height > 0).toBe(true)
  }

  it("readImageSize on random bytes, and on random bytes behind PNG/JPEG signatures", () => {
    const body = fc.uint8Array({ maxLength: 400 })
    const prefixed = fc.tuple(fc.constantFrom<ReadonlyArray<number>>([], PNG_SIG, [0xff, 0xd8, 0xff], SOI), body)
    fc.assert(
      fc.property(prefixed, ([prefix, rest]) => validSize(readImageSize(Uint8Array.from([...prefix, ...rest])))),
      { numRuns: 2000 },
    )
  })

  it("readImageSize on random sequences of plausible JPEG markers and PNG chunks", () => {
    const jpegPart = fc.oneof(
      fc.constantFrom(0xc0, 0xc2, 0xc4, 0xd0, 0xd8, 0xd9, 0xda, 0xe1, 0x01, 0xff).map((m) => [0xff, m]),
      fc.uint8Array({ maxLength: 20 }).map((a) => Array.from(a)),
      fc.tuple(fc.integer({ min: 0xc0, max: 0xfe }), fc.uint8Array({ maxLength: 20 })).map(([m, p]) => seg(m, Array.from(p))),
    )
    const pngPart = fc.oneof(
      fc.tuple(fc.constantFrom("IHDR", "CgBI", "IDAT", "IEND", "tEXt"), fc.uint8Array({ maxLength: 20 })).map(([t, d]) =>
        pngChunk(t, Array.from(d)),
      ),
      fc.uint8Array({ maxLength: 12 }).map((a) => Array.from(a)),
    )
    fc.assert(fc.property(fc.array(jpegPart, { maxLength: 12 }), (parts) => validSize(readImageSize(handJpeg(...parts)))))
    fc.assert(fc.property(fc.array(pngPart, { maxLength: 8 }), (parts) => validSize(readImageSize(handPng(...parts)))))
  })

  it("inspectImage on arbitrary strings and on base64 of arbitrary bytes", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), fc.constantFrom(...MIMES), (s, mime) => wellFormed(inspectImage(s, mime))),
      { numRuns: 1000 },
    )
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), fc.constantFrom(...MIMES), (bytes, mime) =>
        wellFormed(inspectImage(b64(bytes), mime)),
      ),
      { numRuns: 1000 },
    )
  })

  it("inspectImage on real images with random bytes overwritten or truncated anywhere", async () => {
    const images: ReadonlyArray<readonly [Buffer, ImageMime]> = [
      [await canvas(40, 30).withMetadata().withIccProfile("srgb").jpeg().toBuffer(), "image/jpeg"],
      [await canvas(40, 30).jpeg({ progressive: true }).toBuffer(), "image/jpeg"],
      [await pngOf(40, 30), "image/png"],
    ]
    for (const [image, mime] of images) {
      for (let n = 0; n <= image.length; n++) wellFormed(inspectImage(b64(image.subarray(0, n)), mime))
      const header = Math.min(image.length, 1200)
      const mutation = fc.array(fc.tuple(fc.nat({ max: header - 1 }), fc.integer({ min: 0, max: 255 })), {
        minLength: 1,
        maxLength: 6,
      })
      fc.assert(
        fc.property(mutation, (edits) => {
          const copy = Buffer.from(image)
          for (const [at, value] of edits) copy[at] = value
          wellFormed(inspectImage(b64(copy), mime))
          validSize(readImageSize(copy))
        }),
        { numRuns: 300 },
      )
    }
  })
})
