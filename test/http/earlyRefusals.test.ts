// Every refusal given before a body is read is read by the client that is still sending that body, slowly: the
// answer's status and body arrive, and the connection is never reset under it (no ECONNRESET, no broken pipe).
import { describe, expect, it } from "@effect/vitest"
import { connect } from "node:net"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { MAX_BODY_BYTES } from "../../src/domain/bodies.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"
import { FrontServer } from "../../src/http/nodeServer.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { Server, serverLayer } from "../support/server.ts"

const ServerUnderTest = serverLayer({
  dependencies: Layer.mergeAll(
    VisionModelLive,
    Layer.succeed(FoodDb, { matcherVersion: "test", match: () => Effect.succeedNone, ...noFoods }),
    FundingMemory({ alice: 1 }),
    LimitsUnlimited
  )
})

/** What the client saw: the answer (status, headers, body), and any error its connection gave while it sent and read. */
interface Seen {
  readonly status?: number
  readonly headers: Record<string, string>
  readonly body?: string
  readonly error?: string
}

const parse = (bytes: Buffer): Omit<Seen, "error"> | undefined => {
  const end = bytes.indexOf("\r\n\r\n")
  if (end < 0) return undefined
  const [statusLine, ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n")
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()]))
  const length = Number(headers["content-length"])
  const body = bytes.subarray(end + 4)
  if (!Number.isFinite(length) || body.length < length) return undefined
  return { status: Number(statusLine!.split(" ")[1]), headers, body: body.subarray(0, length).toString("utf8") }
}

/**
 * Sends `head` (request line and headers) at once, then `body` in `pieces` with a pause after each, whatever the
 * server answers meanwhile (as a client that writes its whole body before it reads); resolves once the whole body
 * is sent and the answer has arrived, or the connection ended or broke.
 */
const sendSlowly = (url: string, head: string, body: Buffer, pieces = 8, pauseMs = 40) =>
  new Promise<Seen>((resolve) => {
    const { hostname, port } = new URL(url)
    // Half-open: the server's end of the connection does not stop the client's sending, as in a client that writes its whole body first.
    const socket = connect({ port: Number(port), host: hostname, allowHalfOpen: true })
    let received = Buffer.alloc(0)
    let error: string | undefined
    let sent = false
    const done = () => {
      const answer = parse(received)
      if (error === undefined && (answer === undefined || !sent)) return
      socket.destroy()
      resolve({ headers: {}, ...answer, ...(error === undefined ? {} : { error }) })
    }
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      done()
    })
    socket.on("error", (failure: NodeJS.ErrnoException) => {
      error = failure.code ?? failure.message
      done()
    })
    socket.on("close", () => {
      error ??= parse(received) === undefined ? "closed without an answer" : undefined
      sent = true
      done()
    })
    const deadline = setTimeout(() => {
      error ??= "no answer within 15 s"
      sent = true
      done()
    }, 15_000)
    socket.once("close", () => clearTimeout(deadline))
    socket.write(head)
    const size = Math.ceil(body.length / pieces)
    const next = (at: number): void => {
      if (socket.destroyed) return
      if (at >= body.length) {
        sent = true
        done()
        return
      }
      socket.write(body.subarray(at, at + size))
      setTimeout(() => next(at + size), pauseMs)
    }
    next(0)
  })

/** A request head; `connection: close` unless told otherwise, so that any answer given before the body ends is followed by a close. */
const headOf = (method: string, path: string, headers: Record<string, string>, length: number | "chunked") =>
  [
    `${method} ${path} HTTP/1.1`,
    "host: 127.0.0.1",
    ...Object.entries({ connection: "close", ...headers }).map(([name, value]) => `${name}: ${value}`),
    length === "chunked" ? "transfer-encoding: chunked" : `content-length: ${length}`,
    "",
    ""
  ].join("\r\n")

/** A body sent chunked: one chunk per 64 KiB, then the last. */
const chunked = (body: Buffer) => {
  const parts: Array<Buffer> = []
  for (let at = 0; at < body.length; at += 65_536) {
    const piece = body.subarray(at, at + 65_536)
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n"))
  }
  return Buffer.concat([...parts, Buffer.from("0\r\n\r\n")])
}

/** A JSON array nested 100,000 deep: 200 KB. */
const DEEP = Buffer.from(`${"[".repeat(100_000)}${"]".repeat(100_000)}`)
const JSON_TYPE = { "content-type": "application/json" }
const PAYMENT = Buffer.from(JSON.stringify({ x402Version: 2, payload: { signature: `0x${"ab".repeat(65)}` } })).toString("base64")

/** `count` headers of about `width` bytes each. */
const extraHeaders = (count: number, width: number) =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`x-extra-${String(i).padStart(3, "0")}`, "v".repeat(width)]))

const expectAnswer = (seen: Seen, status: number, code: string) => {
  expect(seen.error, JSON.stringify(seen).slice(0, 300)).toBeUndefined()
  expect(seen.status, seen.body?.slice(0, 300)).toBe(status)
  expect(JSON.parse(seen.body!).error.code).toBe(code)
}

describe("early refusals while the body is still arriving", () => {
  it.layer(ServerUnderTest, { timeout: 120_000 })((it) => {
    it.effect("feedback with a key, a payment, 300 long headers and a body nested 100,000 deep: 431 headers_too_large, read whole", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const headers = { ...JSON_TYPE, authorization: "Bearer memory_alice", "payment-signature": PAYMENT, ...extraHeaders(300, 60) }
        // All at once, and slowly: either way the client reads the answer.
        for (const pieces of [1, 8]) {
          const seen = yield* Effect.promise(() => sendSlowly(url, headOf("POST", "/v1/credits/feedback", headers, DEEP.length), DEEP, pieces))
          expectAnswer(seen, 431, "headers_too_large")
          expect(seen.headers["connection"]).toBe("close")
        }
      }))

    it.effect("the same with 300 short headers: refused by the body's checks, read whole", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const headers = { ...JSON_TYPE, authorization: "Bearer memory_alice", "payment-signature": PAYMENT, ...extraHeaders(300, 8) }
        const seen = yield* Effect.promise(() => sendSlowly(url, headOf("POST", "/v1/credits/feedback", headers, DEEP.length), DEEP))
        expectAnswer(seen, 400, "invalid_request")
      }))

    it.effect("every refusal given before the body is read: read whole, with the connection closing after it or kept", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const cases: ReadonlyArray<readonly [string, string, Record<string, string>, Buffer, number, string]> = [
          ["a type that is not JSON", "/v1/analyze", { "content-type": "text/plain" }, DEEP, 415, "unsupported_media_type"],
          ["an untrusted browser origin", "/v1/analyze", { ...JSON_TYPE, origin: "https://elsewhere.example" }, DEEP, 403, "untrusted_origin"],
          ["a body nested too deep", "/v1/analyze", JSON_TYPE, DEEP, 400, "invalid_request"],
          ["a key given twice", "/v1/analyze", JSON_TYPE, Buffer.from(`{"order_id":"a","order_id":"b",${'"x":"y",'.repeat(20_000)}"z":1}`), 400, "invalid_request"],
          ["an unknown key", "/v1/credits/feedback", { ...JSON_TYPE, authorization: "Bearer mk_live_made_up" }, Buffer.from(JSON.stringify({ note: "x".repeat(150_000) })), 401, "invalid_key"],
          ["a path nothing serves", "/v1/nowhere", JSON_TYPE, Buffer.from(JSON.stringify({ note: "x".repeat(150_000) })), 404, "not_found"]
        ]
        for (const [what, path, headers, body, status, code] of cases) {
          for (const connection of ["close", "keep-alive"]) {
            const seen = yield* Effect.promise(() => sendSlowly(url, headOf("POST", path, { ...headers, connection }, body.length), body))
            expect(seen.error, `${what}, ${connection}`).toBeUndefined()
            expectAnswer(seen, status, code)
          }
        }
        // A GET the tool interface refuses, with a body all the same.
        const refusedGet = yield* Effect.promise(() => sendSlowly(url, headOf("GET", "/mcp", JSON_TYPE, DEEP.length), DEEP))
        expect(refusedGet.error).toBeUndefined()
        expect(refusedGet.status).toBe(405)
      }))

    it.effect("a body too large, sent slowly and chunked, on REST and on the tool interface: the 413 is read", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const huge = chunked(Buffer.from(`{"image_base64":"${"A".repeat(MAX_BODY_BYTES + 100_000)}"}`))
        const rest = yield* Effect.promise(() => sendSlowly(url, headOf("POST", "/v1/analyze", JSON_TYPE, "chunked"), huge, 24, 10))
        expectAnswer(rest, 413, "request_too_large")
        const tools = yield* Effect.promise(() =>
          sendSlowly(url, headOf("POST", "/mcp", { ...JSON_TYPE, accept: "application/json, text/event-stream" }, "chunked"), huge, 24, 10)
        )
        expect(tools.error).toBeUndefined()
        expect(tools.status).toBe(413)
      }))

    it.effect("a request that is not HTTP: 400 invalid_request, read while the rest still arrives", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const head = headOf("POST", "/v1/analyze", { ...JSON_TYPE, "bad header": "x" }, DEEP.length)
        expectAnswer(yield* Effect.promise(() => sendSlowly(url, head, DEEP)), 400, "invalid_request")
      }))
  })

  it.effect("a server not yet serving: 503 starting, read once the body has arrived", () =>
    Effect.gen(function* () {
      const server = new FrontServer()
      yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
      const address = server.address()
      const url = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`
      const seen = yield* Effect.promise(() => sendSlowly(url, headOf("POST", "/v1/analyze", JSON_TYPE, DEEP.length), DEEP))
      yield* Effect.promise(() => new Promise((resolve) => server.close(resolve)))
      expectAnswer(seen, 503, "starting")
    }))
})
