// A body too large is answered 413 request_too_large, and every common client reads that answer: Node's http
// client, undici's fetch and curl, with the length declared or chunked. A body far too large is still cut off early.
import { describe, expect, it } from "@effect/vitest"
import { afterAll } from "vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { SHRINK_PHOTO } from "../../src/domain/image.ts"
import { MAX_BODY_BYTES } from "../../src/domain/bodies.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"
import { DRAIN_BYTES } from "../../src/request/body.ts"
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

const MB = 1_000_000
const PIECE = 64 * 1024

/** A photo request of `size` bytes, made a piece at a time as it is sent: never held whole. */
function* pieces(size: number): Generator<Buffer> {
  const head = Buffer.from('{"mime_type":"image/jpeg","image_base64":"')
  const tail = Buffer.from('"}')
  const filler = Buffer.alloc(PIECE, "A")
  yield head
  for (let left = size - head.length - tail.length; left > 0; left -= PIECE) yield left >= PIECE ? filler : filler.subarray(0, left)
  yield tail
}

/** What a client saw: the answer's status and text, or the error it got instead; and how many bytes it handed on. */
interface Seen {
  readonly status?: number
  readonly text?: string
  readonly error?: string
  readonly sent: number
}

const HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  "idempotency-key": "too-large-body-key-0001",
  authorization: "Bearer memory_alice"
}

/**
 * Node's http client, writing the body as fast as the connection takes it and going on after an answer, until the
 * request is over or the connection breaks: `sent` is then how much the server let in.
 */
const viaNodeHttp = (url: string, size: number, chunked: boolean) =>
  new Promise<Seen>((resolve) => {
    let sent = 0
    let seen: Omit<Seen, "sent"> = {}
    const outgoing = request(url, { method: "POST", headers: { ...HEADERS, ...(chunked ? {} : { "content-length": String(size) }) } })
    outgoing.on("response", (incoming) => {
      let text = ""
      incoming.setEncoding("utf8").on("data", (chunk) => (text += chunk))
      incoming.on("end", () => (seen = { ...seen, status: incoming.statusCode ?? 0, text }))
    })
    outgoing.on("error", (error: NodeJS.ErrnoException) => (seen = { ...seen, error: error.code ?? error.message }))
    outgoing.on("close", () => resolve({ ...seen, sent }))
    const body = pieces(size)
    const pump = (): void => {
      for (;;) {
        if (outgoing.destroyed) return
        const next = body.next()
        if (next.done) return void outgoing.end()
        sent += next.value.length
        if (!outgoing.write(next.value)) return void outgoing.once("drain", pump)
      }
    }
    pump()
  })

/** undici's fetch (Node's global fetch): the body whole with its length, or streamed from the generator (chunked). */
const viaFetch = async (url: string, size: number, chunked: boolean): Promise<Seen> => {
  let sent = 0
  const body = pieces(size)
  const stream = new ReadableStream<Uint8Array>({
    pull: (controller) => {
      const next = body.next()
      if (next.done) return controller.close()
      sent += next.value.length
      controller.enqueue(new Uint8Array(next.value))
    }
  })
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: HEADERS,
      ...(chunked ? { body: stream, duplex: "half" } : { body: Buffer.concat([...pieces(size)]) })
    } as RequestInit)
    if (!chunked) sent = size
    return { status: response.status, text: await response.text(), sent }
  } catch (error) {
    const cause = error instanceof Error && error.cause instanceof Error ? (error.cause as NodeJS.ErrnoException) : undefined
    return { error: cause?.code ?? String(error), sent }
  }
}

/** curl, the body from a file, with its length or chunked. */
const viaCurl = (url: string, file: string, size: number, chunked: boolean) =>
  new Promise<Seen>((resolve) => {
    const headers = Object.entries(HEADERS).flatMap(([name, value]) => ["-H", `${name}: ${value}`])
    execFile(
      "curl",
      ["-sS", "-w", "\n%{http_code}", ...headers, ...(chunked ? ["-H", "Transfer-Encoding: chunked"] : []), "--data-binary", `@${file}`, url],
      { maxBuffer: 1024 * 1024 },
      (error, stdout, stderr) => {
        const at = stdout.lastIndexOf("\n")
        const status = Number(stdout.slice(at + 1))
        resolve(error !== null || status === 0 ? { error: stderr.trim() || String(error), sent: size } : { status, text: stdout.slice(0, at), sent: size })
      }
    )
  })

const expectRestTooLarge = (seen: Seen, what: string) => {
  expect(seen.error, what).toBeUndefined()
  expect(seen.status, what).toBe(413)
  expect(JSON.parse(seen.text!), what).toEqual({
    _tag: "PayloadTooLarge",
    error: { code: "request_too_large", message: `request body exceeds ${MAX_BODY_BYTES} bytes: ${SHRINK_PHOTO}` }
  })
}

const expectMcpTooLarge = (seen: Seen, what: string) => {
  expect(seen.error, what).toBeUndefined()
  expect(seen.status, what).toBe(413)
  expect(JSON.parse(seen.text!), what).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000, message: expect.stringContaining("Payload Too Large") } })
}

describe("a body too large", () => {
  it.layer(ServerUnderTest, { timeout: 300_000 })((it) => {
    const folder = mkdtempSync(join(tmpdir(), "morsel-large-bodies-"))
    afterAll(() => rmSync(folder, { recursive: true, force: true }))
    const files = new Map([3 * MB, 30 * MB].map((size) => [size, join(folder, `${size}.json`)]))
    for (const [size, file] of files) writeFileSync(file, Buffer.concat([...pieces(size)]))

    for (const [path, expectTooLarge] of [
      ["/v1/analyze", expectRestTooLarge],
      ["/mcp", expectMcpTooLarge]
    ] as const) {
      it.effect(`${path}: 3 MB and 30 MB bodies get 413 in Node's http client, undici's fetch and curl, length declared or chunked`, () =>
        Effect.gen(function* () {
          const { url } = yield* Server
          for (const [size, file] of files) {
            for (const chunked of [false, true]) {
              const how = `${size / MB} MB ${chunked ? "chunked" : "with Content-Length"}`
              expectTooLarge(yield* Effect.promise(() => viaNodeHttp(url + path, size, chunked)), `node:http ${how}`)
              expectTooLarge(yield* Effect.promise(() => viaFetch(url + path, size, chunked)), `fetch ${how}`)
              expectTooLarge(yield* Effect.promise(() => viaCurl(url + path, file, size, chunked)), `curl ${how}`)
            }
          }
          // The service still answers on the same port.
          const health = yield* Effect.promise(() => fetch(`${url}/health`))
          expect(health.status).toBe(200)
        }))
    }

    it.effect("a 1 GB body is cut off after the server has read its bound, whether its length is declared or not", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        for (const path of ["/v1/analyze", "/mcp"]) {
          for (const chunked of [false, true]) {
            const seen = yield* Effect.promise(() => viaNodeHttp(url + path, 1_000 * MB, chunked))
            console.log(`1 GB to ${path}, ${chunked ? "chunked" : "Content-Length"}: ${seen.sent} bytes sent, then ${[seen.status, seen.error].join(" ")}`)
            // A declared length past the bound is refused before the body is read at all; else the bound is read.
            if (chunked) expect(seen.sent, path).toBeGreaterThan(DRAIN_BYTES)
            expect(seen.sent, path).toBeLessThan(chunked ? DRAIN_BYTES + 16 * MB : 16 * MB)
            expect(seen.error, path).toBeDefined()
          }
        }
      }))
  })
})
