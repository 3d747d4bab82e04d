// The image checks of an analysis request (SPEC rules 1-7): what inspectImage accepts and why it refuses the rest.
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { IMAGE_LIMITS } from "../../src/domain/image.ts"
import {
  accepted,
  b64,
  canvas,
  expectRejected,
  handJpeg,
  handPng,
  ihdr,
  jpegOf,
  markerIndex,
  padTo,
  PNG_SIG,
  pngChunk,
  pngOf,
  rejected,
  sof,
  SOS
} from "./imageFixtures.ts"

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
    const chars = fc.constantFrom(..."AQgw+/=-_ .\n*\u00e9\u0000\u2028")
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 16 }), (letters) => {
        const s = letters.join("")
        expect(rejected(s, "image/png").reason === "invalid_base64").toBe(!strict(s))
      }),
      { numRuns: 5000 },
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
