// A body's long image is parsed apart from the rest of its JSON: the same values as JSON.parse, whatever the encoder.
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Layer, Option } from "effect"
import fc from "fast-check"
import sharp from "sharp"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { inspectImage } from "../../src/domain/image.ts"
import { FoodDb } from "../../src/foods/FoodDb.ts"
import { liftImage, parseBody, wholeText } from "../../src/http/body.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { decodeDataUrl, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { errorCode, isRecord, send } from "../support/http.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"
import { noFoods } from "../../src/foods/FoodDbLive.ts"

/** JSON.parse's answer, or the fact that it threw. */
const parsed = (parse: () => unknown) => {
  try {
    return { value: parse() }
  } catch {
    return { threw: true }
  }
}

/** A noisy JPEG as a phone makes them (it does not compress to nothing): 400 KB or so at 1200 × 900. */
const noisyPhoto = async (width: number, height: number, seed: number) => {
  const pixels = Buffer.alloc(width * height * 3)
  let state = seed
  for (let i = 0; i < pixels.length; i++) {
    state = (state * 1103515245 + 12345) & 0x7fffffff
    pixels[i] = 40 + ((state >> 16) % 160)
  }
  return sharp(pixels, { raw: { width, height, channels: 3 } }).jpeg({ quality: 90 }).toBuffer()
}

describe("a body's image lifted out of its JSON", () => {
  const image = "QUJD".repeat(20_000)

  it("gives what JSON.parse gives, or fails where it fails (property)", () => {
    // Pieces that could fool a scanner: keys inside strings, escapes, a NUL escape, other nesting, non-ASCII.
    const piece = fc.constantFrom(
      '"image_base64"',
      '"image_base64":',
      '"image_base64":"',
      '{"image_base64":"',
      '{"x":',
      `"${image}"`,
      image,
      '"\\u0000"',
      "\\",
      '\\"',
      '"',
      "{",
      "}",
      "[",
      "]",
      ":",
      ",",
      " ",
      "\n",
      "\t",
      '"é"',
      "1",
      '"a"'
    )
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 14 }), fc.boolean(), (pieces, wrapped) => {
        const text = wrapped ? `{${pieces.join("")}}` : pieces.join("")
        const body = Buffer.from(text)
        const lifted = liftImage(body)
        if (lifted !== undefined) expect(wholeText(lifted)).toBe(text)
        // A raw line break or tab in a lifted image is left to the image's checks, which refuse it.
        if (lifted !== undefined && /[\n\t]/.test(lifted.image)) {
          expect(Either.getLeft(inspectImage(lifted.image, "image/jpeg"))).toEqual(Option.some(expect.objectContaining({ reason: "invalid_base64" })))
        } else {
          expect(parsed(() => parseBody(body))).toEqual(parsed(() => JSON.parse(text)))
        }
      }),
      { numRuns: 3000 }
    )
  })

  it("lifts the top-level image only, and keeps JSON.parse's answer for everything around it", () => {
    const cases = [
      `{"image_base64":"${image}","mime_type":"image/jpeg"}`,
      `{\n  "mime_type" : "image/jpeg",\n  "language": "lt",\n  "image_base64" :\n  "${image}"\n}`,
      `{"x":{"image_base64":"${image}"}}`,
      `{"x":{"image_base64":"${image}"},"image_base64":"\\u0000"}`,
      `{"image_base64":"${image}","image_base64":"second"}`,
      `{"note":"ąčę","image_base64":"${image}"}`,
      `[{"image_base64":"${image}"}]`
    ]
    for (const text of cases) {
      expect(liftImage(Buffer.from(text))).toBeDefined()
      expect(parseBody(Buffer.from(text))).toEqual(JSON.parse(text))
    }
    // Escaped slashes (PHP's json_encode) and short images are parsed whole.
    const escaped = `{"image_base64":"${image.replaceAll("J", "\\/")}"}`
    expect(liftImage(Buffer.from(escaped))).toBeUndefined()
    expect(parseBody(Buffer.from(escaped))).toEqual(JSON.parse(escaped))
    expect(liftImage(Buffer.from(`{"image_base64":"QUJD"}`))).toBeUndefined()
  })

  it.scoped("the same photo is the same request in any encoding; line breaks in it are named, and nothing is charged", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.setFallback(Reply.answer(chickenRice))
      const funding = yield* Layer.build(FundingMemory({ alice: 3 }))
      const { url } = yield* startServer({
        env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url },
        dependencies: Layer.mergeAll(
          VisionModelLive,
          Layer.succeed(FoodDb, { matcherVersion: "test", match: () => Effect.succeedNone, ...noFoods }),
          Layer.succeedContext(funding),
          LimitsUnlimited
        )
      })
      const photo = yield* Effect.promise(() => noisyPhoto(1200, 900, 7))
      const base64 = photo.toString("base64")
      expect(base64.length).toBeGreaterThan(200_000)
      const post = (rawBody: string, key = "lifted-image-key-0001") =>
        Effect.promise(() =>
          send(`${url}/v1/analyze`, {
            rawBody,
            headers: { "content-type": "application/json", "idempotency-key": key, authorization: "Bearer memory_alice" }
          })
        )

      const first = yield* post(JSON.stringify({ image_base64: base64, mime_type: "image/jpeg" }))
      expect(first.status, first.text.slice(0, 300)).toBe(200)
      const requestId = isRecord(first.body) ? first.body["request_id"] : undefined
      const seen = decodeDataUrl(fake.requests[0]!.imageUrls[0]!)
      expect(yield* Effect.promise(() => sharp(seen.bytes).metadata())).toMatchObject({ width: 1024, height: 768 })

      // Pretty-printed with the image last, and with escaped slashes: the same input, so the same result again.
      for (const again of [
        JSON.stringify({ mime_type: "image/jpeg", language: "en", image_base64: base64 }, null, 2),
        JSON.stringify({ image_base64: base64, mime_type: "image/jpeg" }).replaceAll("/", "\\/")
      ]) {
        const replay = yield* post(again)
        expect(replay.status, replay.text.slice(0, 300)).toBe(200)
        expect(isRecord(replay.body) ? replay.body["request_id"] : undefined).toBe(requestId)
      }
      // Another photo under the same key is another input.
      const other = yield* Effect.promise(() => noisyPhoto(1200, 900, 8))
      const conflict = yield* post(JSON.stringify({ image_base64: other.toString("base64"), mime_type: "image/jpeg" }))
      expect(conflict.status).toBe(409)
      expect(errorCode(conflict)).toBe("idempotency_conflict")

      // `base64` without -w0 wraps its output every 76 characters; pasted into JSON, the image says so.
      const wrapped = base64.replace(/.{76}/g, "$&\n")
      const refused = yield* post(`{"image_base64":"${wrapped}","mime_type":"image/jpeg"}`, "lifted-image-key-0002")
      expect(refused.status).toBe(400)
      expect(errorCode(refused)).toBe("invalid_base64")
      expect(refused.text).toContain("line breaks")

      expect(fake.requests).toHaveLength(1)
      const ledger = Context.get(funding, FundingMemoryLedger)
      expect(yield* ledger.balances).toEqual({ alice: 2 })
    }))
})
