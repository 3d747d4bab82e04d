import { Either } from "effect"
import fc from "fast-check"
import sharp from "sharp"
import { describe, expect, it } from "vitest"
import {
  IMAGE_LIMITS,
  type ImageMime,
  type ImageRejection,
  type ImageRejectionReason,
  type InspectedImage,
  inspectImage,
  readImageSize,
} from "../../src/domain/image.ts"

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

const canvas = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: { r: 200, g: 120, b: 40 } } })

const pngOf = (width: number, height: number): Promise<Buffer> => canvas(width, height).png().toBuffer()
const jpegOf = (width: number, height: number): Promise<Buffer> => canvas(width, height).jpeg().toBuffer()

const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64")

const accepted = (imageBase64: string, mime: ImageMime): InspectedImage => {
  const result = inspectImage(imageBase64, mime)
  if (Either.isLeft(result)) throw new Error(`expected acceptance, got ${result.left.reason}: ${result.left.message}`)
  return result.right
}

const rejected = (imageBase64: string, mime: ImageMime): ImageRejection => {
  const result = inspectImage(imageBase64, mime)
  if (Either.isRight(result)) throw new Error(`expected rejection, got ${result.right.width}x${result.right.height}`)
  return result.left
}

const expectRejected = (imageBase64: string, mime: ImageMime, reason: ImageRejectionReason): ImageRejection => {
  const rejection = rejected(imageBase64, mime)
  expect(rejection.reason).toBe(reason)
  expect(rejection.status).toBe(reason === "image_too_large" ? 413 : 400)
  expect(rejection.message.length).toBeGreaterThan(10)
  return rejection
}

/** Index of the first `FF <marker>` pair at or after offset 2, or -1. */
const markerIndex = (bytes: Uint8Array, marker: number): number => {
  for (let i = 2; i + 1 < bytes.length; i++) if (bytes[i] === 0xff && bytes[i + 1] === marker) return i
  return -1
}

/** `bytes` followed by zeros up to `size` bytes (headers are untouched, so the image stays inspectable). */
const padTo = (bytes: Uint8Array, size: number): Buffer => {
  const out = Buffer.alloc(size)
  out.set(bytes)
  return out
}

const PNG_SIG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]

const u32be = (n: number): Array<number> => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]

/** A PNG chunk; the CRC is left as zeros because the parser does not check it. */
const pngChunk = (type: string, data: ReadonlyArray<number>): Array<number> => [
  ...u32be(data.length),
  ...Array.from(type, (c) => c.charCodeAt(0)),
  ...data,
  0,
  0,
  0,
  0,
]

const ihdr = (width: number, height: number): Array<number> =>
  pngChunk("IHDR", [...u32be(width), ...u32be(height), 8, 2, 0, 0, 0])

const handPng = (...chunks: ReadonlyArray<ReadonlyArray<number>>): Uint8Array =>
  Uint8Array.from([...PNG_SIG, ...chunks.flat()])

const SOI = [0xff, 0xd8]

/** A JPEG marker segment with a length field (the length counts itself). */
const seg = (marker: number, payload: ReadonlyArray<number>): Array<number> => [
  0xff,
  marker,
  ((payload.length + 2) >> 8) & 0xff,
  (payload.length + 2) & 0xff,
  ...payload,
]

const sof = (marker: number, width: number, height: number, components = 3): Array<number> =>
  seg(marker, [
    8,
    (height >> 8) & 0xff,
    height & 0xff,
    (width >> 8) & 0xff,
    width & 0xff,
    components,
    ...Array.from({ length: components }, (_, i) => [i + 1, 0x11, 0]).flat(),
  ])

const SOS = seg(0xda, [1, 1, 0, 0, 0x3f, 0])
const APP0 = seg(0xe0, [0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0])

const handJpeg = (...parts: ReadonlyArray<ReadonlyArray<number>>): Uint8Array => Uint8Array.from([...SOI, ...parts.flat()])

const SOF_MARKERS = [0xc0, 0xc1, 0xc2, 0xc3, 0xc5, 0xc6, 0xc7, 0xc9, 0xca, 0xcb, 0xcd, 0xce, 0xcf]

// ---------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------

describe("IMAGE_LIMITS", () => {
  it("allows exactly the base64 length that can still decode to maxBytes", () => {
    expect(IMAGE_LIMITS.maxBase64Length).toBe(Math.ceil(IMAGE_LIMITS.maxBytes / 3) * 4)
    expect(IMAGE_LIMITS).toEqual({ maxBase64Length: 2_666_668, maxBytes: 2_000_000, minSide: 16, maxSide: 2048 })
  })
})

describe("inspectImage: accepted images", () => {
  it("accepts a baseline JPEG and returns its decoded bytes and dimensions", async () => {
    const jpeg = await jpegOf(640, 480)
    expect(markerIndex(jpeg, 0xc0)).toBeGreaterThan(0)
    const image = accepted(b64(jpeg), "image/jpeg")
    expect(image).toMatchObject({ width: 640, height: 480, mime: "image/jpeg" })
    expect(Buffer.from(image.bytes).equals(jpeg)).toBe(true)
  })

  it("accepts a progressive JPEG (SOF2)", async () => {
    const jpeg = await canvas(300, 200).jpeg({ progressive: true }).toBuffer()
    expect(markerIndex(jpeg, 0xc2)).toBeGreaterThan(0)
    expect(markerIndex(jpeg, 0xc0)).toBe(-1)
    expect(accepted(b64(jpeg), "image/jpeg")).toMatchObject({ width: 300, height: 200 })
  })

  it("accepts a JPEG with EXIF (APP1) and ICC (APP2) segments before SOF", async () => {
    const jpeg = await canvas(120, 90).withMetadata().withIccProfile("srgb").jpeg().toBuffer()
    const sofAt = markerIndex(jpeg, 0xc0)
    expect(markerIndex(jpeg, 0xe1)).toBeGreaterThan(0)
    expect(markerIndex(jpeg, 0xe1)).toBeLessThan(sofAt)
    expect(markerIndex(jpeg, 0xe2)).toBeGreaterThan(0)
    expect(markerIndex(jpeg, 0xe2)).toBeLessThan(sofAt)
    expect(accepted(b64(jpeg), "image/jpeg")).toMatchObject({ width: 120, height: 90 })
  })

  it("accepts a PNG", async () => {
    const png = await pngOf(333, 222)
    expect(accepted(b64(png), "image/png")).toMatchObject({ width: 333, height: 222, mime: "image/png" })
  })

  it("accepts a PNG with a chunk (Apple CgBI) inserted before IHDR", async () => {
    const png = await pngOf(100, 50)
    const withCgbi = Buffer.concat([
      png.subarray(0, 8),
      Uint8Array.from(pngChunk("CgBI", [0x50, 0x00, 0x20, 0x02])),
      png.subarray(8),
    ])
    expect(withCgbi.subarray(12, 16).toString("latin1")).toBe("CgBI")
    expect(accepted(b64(withCgbi), "image/png")).toMatchObject({ width: 100, height: 50 })
  })
})

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

describe("inspectImage: rule 1, base64 string length (413 before any decoding)", () => {
  it("lets a string of exactly 2,666,668 chars through (a real PNG padded to 2,000,000 bytes)", async () => {
    const bytes = padTo(await pngOf(64, 64), IMAGE_LIMITS.maxBytes)
    const encoded = b64(bytes)
    expect(encoded.length).toBe(2_666_668)
    const image = accepted(encoded, "image/png")
    expect(image.bytes.length).toBe(2_000_000)
    expect(image).toMatchObject({ width: 64, height: 64 })
  })

  it("rejects 2,666,669 chars with 413, even when the string is not base64 at all", () => {
    const rejection = expectRejected("A".repeat(2_666_668) + "=", "image/png", "image_too_large")
    expect(rejection.message).toContain("2,666,669")
    expect(rejection.message).toContain("2,666,668")
    expectRejected("!".repeat(2_666_669), "image/jpeg", "image_too_large")
  })
})

describe("inspectImage: rule 2, strict standard base64", () => {
  it("accepts padded and unpadded-length strings over the full alphabet", () => {
    // Valid base64 whose bytes are not an image gets past this rule and fails later, on the magic bytes.
    for (const s of ["QQ==", "QUI=", "QUJD", "+/8=", "AAAA+/+/azAZ09=="]) expectRejected(s, "image/png", "unsupported_image")
  })

  it("accepts base64 of any byte string (property)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), (bytes) => {
        expect(rejected(b64(bytes), "image/png").reason).not.toBe("invalid_base64")
      }),
    )
  })

  it("accepts padding whose unused bits are not zero, as the strict alphabet and padding rules do", () => {
    for (const s of ["QR==", "QUJ=", "AAAA/B=="]) expectRejected(s, "image/png", "unsupported_image")
  })

  it("rejects exactly the strings outside the alphabet, the padding or the length rules (property)", () => {
    const strict = (s: string) => s.length > 0 && s.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s)
    const chars = fc.constantFrom(..."AQgw+/=-_ .\n")
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 16 }), (letters) => {
        const s = letters.join("")
        expect(rejected(s, "image/png").reason === "invalid_base64").toBe(!strict(s))
      }),
      { numRuns: 2000 },
    )
  })

  it("rejects an empty string", () => {
    expect(expectRejected("", "image/png", "invalid_base64").message).toMatch(/empty/)
  })

  it("rejects whitespace: leading/trailing spaces, trailing newline, MIME-style line wrapping", async () => {
    const encoded = b64(await pngOf(32, 32))
    const wrapped = encoded.replace(/(.{76})/g, "$1\r\n")
    for (const s of [` ${encoded}`, `${encoded} `, `${encoded}\n`, wrapped, "QU JD", "QUJD\tQUJD"]) {
      expect(expectRejected(s, "image/png", "invalid_base64").message).toMatch(/whitespace/)
    }
  })

  it("rejects a data: URL prefix", async () => {
    const encoded = b64(await pngOf(32, 32))
    expect(expectRejected(`data:image/png;base64,${encoded}`, "image/png", "invalid_base64").message).toMatch(/data: URL/)
  })

  it("rejects the URL-safe alphabet", () => {
    expect(b64(Uint8Array.from([0xfb, 0xff]))).toBe("+/8=")
    for (const s of ["-_8=", "-/8=", "+_8="]) {
      expect(expectRejected(s, "image/png", "invalid_base64").message).toMatch(/URL-safe/)
    }
  })

  it("rejects bad padding: missing, misplaced, or too much", () => {
    for (const s of ["QQ", "QUI", "QQ=", "QQ==QQ==", "Q=QQ", "Q===", "====", "QUJDQ"]) {
      expectRejected(s, "image/png", "invalid_base64")
    }
  })

  it("rejects characters outside the alphabet", () => {
    for (const s of ["QUJ*", "QUJD.", "Q\u00e9JD", "QUJD\u0000"]) expectRejected(s, "image/png", "invalid_base64")
  })
})

describe("inspectImage: rule 3, decoded size (413)", () => {
  it("accepts exactly 2,000,000 decoded bytes", async () => {
    expect(accepted(b64(padTo(await jpegOf(64, 64), 2_000_000)), "image/jpeg").bytes.length).toBe(2_000_000)
  })

  it("rejects 2,000,001 decoded bytes (a 2,666,668-char string without padding)", async () => {
    const encoded = b64(padTo(await pngOf(64, 64), 2_000_001))
    expect(encoded.length).toBe(2_666_668)
    expect(encoded.endsWith("=")).toBe(false)
    const rejection = expectRejected(encoded, "image/png", "image_too_large")
    expect(rejection.message).toContain("2,000,001")
    expect(rejection.message).toContain("2,000,000")
  })
})

describe("inspectImage: rule 4, PNG/JPEG magic bytes", () => {
  it("rejects GIF and WebP bytes", async () => {
    const gif = await canvas(32, 32).gif().toBuffer()
    expect(gif.subarray(0, 6).toString("latin1")).toBe("GIF89a")
    expectRejected(b64(gif), "image/png", "unsupported_image")
    expectRejected(b64(await canvas(32, 32).webp().toBuffer()), "image/jpeg", "unsupported_image")
  })

  it("rejects bytes shorter than a signature or with a near-miss signature", () => {
    expectRejected(b64(Uint8Array.from([0xff, 0xd8])), "image/jpeg", "unsupported_image")
    expectRejected(b64(Uint8Array.from(PNG_SIG.slice(0, 7))), "image/png", "unsupported_image")
    expectRejected(b64(Uint8Array.from([...PNG_SIG.slice(0, 7), 0x0b, ...ihdr(32, 32)])), "image/png", "unsupported_image")
  })
})

describe("inspectImage: rule 5, declared mime matches the bytes", () => {
  it("rejects PNG bytes declared as image/jpeg", async () => {
    const rejection = expectRejected(b64(await pngOf(32, 32)), "image/jpeg", "mime_mismatch")
    expect(rejection.message).toBe("image bytes are PNG but mime is image/jpeg")
  })

  it("rejects JPEG bytes declared as image/png", async () => {
    expectRejected(b64(await jpegOf(32, 32)), "image/png", "mime_mismatch")
  })
})

describe("inspectImage: rule 6, readable header", () => {
  it("rejects a bare PNG signature and a PNG cut inside IHDR", async () => {
    expectRejected(b64(Uint8Array.from(PNG_SIG)), "image/png", "corrupt_image")
    expectRejected(b64((await pngOf(32, 32)).subarray(0, 20)), "image/png", "corrupt_image")
  })

  it("rejects a bare JPEG SOI and a JPEG cut before its SOF", async () => {
    expectRejected("/9j/", "image/jpeg", "corrupt_image")
    const jpeg = await jpegOf(32, 32)
    expectRejected(b64(jpeg.subarray(0, markerIndex(jpeg, 0xc0) + 4)), "image/jpeg", "corrupt_image")
  })

  it("rejects a JPEG whose height is deferred to DNL", () => {
    expectRejected(b64(handJpeg(sof(0xc0, 50, 0), SOS)), "image/jpeg", "corrupt_image")
  })
})

describe("inspectImage: rule 7, each side 16..2048 px", () => {
  it.each([
    [16, 16],
    [2048, 2048],
    [16, 2048],
  ])("accepts a %ix%i PNG and JPEG", async (width, height) => {
    expect(accepted(b64(await pngOf(width, height)), "image/png")).toMatchObject({ width, height })
    expect(accepted(b64(await jpegOf(width, height)), "image/jpeg")).toMatchObject({ width, height })
  })

  it.each([
    [15, 20, "image is 15 px wide; each side must be 16 to 2048 px"],
    [20, 15, "image is 15 px tall; each side must be 16 to 2048 px"],
    [2049, 20, "image is 2049 px wide; each side must be 16 to 2048 px"],
    [20, 2049, "image is 2049 px tall; each side must be 16 to 2048 px"],
    [3000, 10, "image is 3000 px wide and 10 px tall; each side must be 16 to 2048 px"],
  ])("rejects a %ix%i PNG and JPEG", async (width, height, message) => {
    expect(expectRejected(b64(await pngOf(width, height)), "image/png", "image_dimensions").message).toBe(message)
    expect(expectRejected(b64(await jpegOf(width, height)), "image/jpeg", "image_dimensions").message).toBe(message)
  })

  it("rejects header-only images with huge declared sides without allocating pixels", () => {
    expectRejected(b64(handPng(ihdr(0x7fffffff, 0x7fffffff))), "image/png", "image_dimensions")
    expectRejected(b64(handJpeg(sof(0xc2, 65535, 65535))), "image/jpeg", "image_dimensions")
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
