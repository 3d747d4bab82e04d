// A body's long image is parsed apart from the rest of its JSON: the same values as JSON.parse, whatever the encoder.
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Layer, Option } from "effect"
import fc from "fast-check"
import sharp from "sharp"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { inspectImage } from "../../src/domain/image.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { liftImage, parseBody, RepeatedKey, wholeText } from "../../src/request/body.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { decodeDataUrl, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { type Answer, errorCode, isRecord, send } from "../support/http.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"

/** A parse's answer: its value, the key it refused as repeated, or the fact that it threw. */
const parsed = (parse: () => unknown) => {
  try {
    return { value: parse() }
  } catch (error) {
    return error instanceof RepeatedKey ? { repeated: error.key } : { threw: true }
  }
}

/**
 * The first key an object of valid JSON `text` repeats, in text order and compared after unescaping, read by a plain
 * recursive descent: the reference the service's scan is held to.
 */
const STRING = /"[^"\\]*(?:\\.[^"\\]*)*"/y
const firstRepeatedKey = (text: string): string | undefined => {
  let at = 0
  let found: string | undefined
  const space = () => {
    while (at < text.length && " \t\n\r".includes(text[at]!)) at++
  }
  const string = (): string => {
    STRING.lastIndex = at
    const [written] = STRING.exec(text)!
    at += written.length
    return JSON.parse(written) as string
  }
  const value = (): void => {
    space()
    if (text[at] === "{") {
      at++
      const keys = new Set<string>()
      space()
      if (text[at] === "}") return void at++
      for (;;) {
        space()
        const key = string()
        if (keys.has(key)) found ??= key
        keys.add(key)
        space()
        at++
        value()
        space()
        if (text[at++] === "}") return
      }
    }
    if (text[at] === "[") {
      at++
      space()
      if (text[at] === "]") return void at++
      for (;;) {
        value()
        space()
        if (text[at++] === "]") return
      }
    }
    if (text[at] === '"') return void string()
    while (at < text.length && !",]} \t\n\r".includes(text[at]!)) at++
  }
  value()
  return found
}

/** What the service must answer for `text`: JSON.parse's failure, the repeated key it refuses, or JSON.parse's value. */
const expected = (text: string) => {
  const standard = parsed(() => JSON.parse(text))
  const repeated = "value" in standard ? firstRepeatedKey(text) : undefined
  return repeated === undefined ? standard : { repeated }
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

  it("gives what JSON.parse gives, fails where it fails, and refuses a repeated key wherever it is (property)", () => {
    // Pieces that could fool a scanner: keys inside strings, escapes (of the key's own characters too), a NUL
    // escape, repeated keys, other nesting, non-ASCII.
    const piece = fc.constantFrom(
      '"image_base64"',
      '"image_base64":',
      '"image_base64":"',
      '{"image_base64":"',
      '"image\\u005fbase64":',
      '"\\u0069mage_base64":"\\u0000",',
      '"image_base64":"\\u0000",',
      '"a":1,',
      '"\\u0061":',
      '"a\\"":',
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
          expect(parsed(() => parseBody(body))).toEqual(expected(text))
        }
      }),
      { numRuns: 5000 }
    )
  })

  it("refuses valid JSON that repeats a key, at any depth and however the key is escaped, lifted or not (property)", () => {
    // Keys as they are written: some the same name escaped another way.
    const key = fc.constantFrom('"image_base64"', '"image\\u005fbase64"', '"\\u0069mage_base64"', '"mime_type"', '"a"', '"\\u0061"', '"a\\""')
    const space = fc.constantFrom("", " ", "\n  ")
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        fc.constantFrom(`"${image}"`, '"\\u0000"', "1", '"QUJD"', "null"),
        fc.array(tie("value"), { maxLength: 3 }).map((items) => `[${items.join(",")}]`),
        fc
          .array(fc.tuple(space, key, space, tie("value")), { maxLength: 4 })
          .map((members) => `{${members.map(([before, name, after, item]) => `${before}${name}${after}:${item}`).join(",")}}`)
      )
    }))
    // A top-level object that holds the long image first, as a lifted body does.
    const body = fc
      .tuple(fc.array(fc.tuple(key, value), { maxLength: 4 }), fc.boolean())
      .map(([members, imageFirst]) => {
        const rest = members.map(([name, item]) => `${name}:${item}`)
        const all = imageFirst ? [`"image_base64":"${image}"`, ...rest] : [...rest, `"image_base64":"${image}"`]
        return `{${all.join(",")}}`
      })
    let refused = 0
    fc.assert(
      fc.property(body, (text) => {
        const outcome = expected(text)
        if ("repeated" in outcome) refused++
        expect(parsed(() => parseBody(Buffer.from(text)))).toEqual(outcome)
      }),
      { numRuns: 1000 }
    )
    // The property saw both kinds of body.
    expect(refused).toBeGreaterThan(100)
    expect(refused).toBeLessThan(900)
  }, 120_000)

  it("a body that repeats image_base64 is refused, not read as its first image: the smuggling case itself", () => {
    for (const text of [
      `{"image_base64":"${image}","mime_type":"image/jpeg","image_base64":"\\u0000"}`,
      `{"image_base64":"${image}","mime_type":"image/jpeg","image\\u005fbase64":"\\u0000"}`,
      `{"image_base64":"${image}","image_base64":"second"}`,
      `{"image_base64":"${image}","mime_type":"image/jpeg","language":"en","language":"lt"}`,
      `{"image_base64":"${image}","x":{"a":1,"\\u0061":2}}`
    ]) {
      const outcome = expected(text)
      expect("repeated" in outcome, text.slice(-60)).toBe(true)
      expect(parsed(() => parseBody(Buffer.from(text))), text.slice(-60)).toEqual(outcome)
    }
  })

  it("lifts the top-level image only, and keeps JSON.parse's answer for everything around it", () => {
    const cases = [
      `{"image_base64":"${image}","mime_type":"image/jpeg"}`,
      `{\n  "mime_type" : "image/jpeg",\n  "language": "lt",\n  "image_base64" :\n  "${image}"\n}`,
      `{"x":{"image_base64":"${image}"}}`,
      `{"x":{"image_base64":"${image}"},"image_base64":"\\u0000"}`,
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

  it.scoped("a body that repeats a key is refused on REST (stack and fast lane) and MCP, naming the key; nothing is charged", () =>
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
      const base64 = (yield* Effect.promise(() => noisyPhoto(1200, 900, 9))).toString("base64")
      const post = (path: string, rawBody: string, key: string) =>
        Effect.promise(() =>
          send(`${url}${path}`, {
            rawBody,
            headers: {
              "content-type": "application/json",
              accept: "application/json, text/event-stream",
              "idempotency-key": key,
              authorization: "Bearer memory_alice"
            }
          })
        )
      const expectRefused = (answer: Answer, key: string) => {
        expect(answer.status, answer.text.slice(0, 300)).toBe(400)
        expect(errorCode(answer)).toBe("invalid_request")
        expect(answer.text).toContain(`repeats the key \\"${key}\\"`)
      }

      // JSON.parse, and a proxy in front, read the last image; the service must not analyse the first.
      for (const [index, body] of [
        `{"image_base64":"${base64}","mime_type":"image/jpeg","image_base64":"\\u0000"}`,
        `{"image_base64":"${base64}","mime_type":"image/jpeg","image\\u005fbase64":"\\u0000"}`,
        `{"image_base64":"\\u0000","mime_type":"image/jpeg","image_base64":"${base64}"}`
      ].entries()) {
        expectRefused(yield* post("/v1/analyze", body, `repeated-key-rest-000${index}`), "image_base64")
      }
      expectRefused(yield* post("/v1/analyze", `{"image_base64":"${base64}","mime_type":"image/jpeg","language":"en","language":"lt"}`, "repeated-key-rest-0009"), "language")

      // A result kept for a key makes the fast lane read the body: a repeated key is refused there too, not replayed.
      const paid = yield* post("/v1/analyze", JSON.stringify({ image_base64: base64, mime_type: "image/jpeg" }), "repeated-key-rest-0100")
      expect(paid.status, paid.text.slice(0, 300)).toBe(200)
      expectRefused(yield* post("/v1/analyze", `{"image_base64":"${base64}","mime_type":"image/jpeg","image_base64":"\\u0000"}`, "repeated-key-rest-0100"), "image_base64")

      // MCP: the tool's arguments, and the JSON-RPC message around them.
      const call = (args: string, envelope = "") =>
        `{"jsonrpc":"2.0","id":1,${envelope}"method":"tools/call","params":{"name":"analyze_food","arguments":${args}}}`
      for (const [body, key] of [
        [call(`{"idempotency_key":"repeated-key-mcp-0001","image_base64":"!","mime_type":"image/jpeg","image_base64":"${base64}"}`), "image_base64"],
        [call(`{"idempotency_key":"repeated-key-mcp-0002","image_base64":"${base64}","mime_type":"image/jpeg","image_base64":"\\u0000"}`), "image_base64"],
        [call(`{"idempotency_key":"repeated-key-mcp-0003","image_base64":"${base64}","mime_type":"image/jpeg"}`, '"method":"tools/list",'), "method"]
      ] as const) {
        const answer = yield* post("/mcp", body, "unused-by-mcp-00001")
        expect(answer.status, answer.text.slice(0, 300)).toBe(400)
        expect(answer.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } })
        expect(answer.text).toContain(`repeats the key \\"${key}\\"`)
      }

      expect(fake.requests).toHaveLength(1)
      const ledger = Context.get(funding, FundingMemoryLedger)
      expect(yield* ledger.balances).toEqual({ alice: 2 })
      expect(yield* ledger.reserved).toBe(0)
    }), 120_000)
})
