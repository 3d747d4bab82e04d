// A photo as a file reference (ChatGPT's file parameters: image_file { download_url, file_id }) through the official
// MCP client: downloaded from a local https server trusted through MCP_FILE_CA_FILE and allowed by
// MCP_FILE_ALLOWED_HOSTS (127.0.0.2), the same result as the same photo in base64; every address that is not public
// refused before any request leaves the server, with no model call and nothing charged. All traffic stays on 127.0.0.0/8.
import { execFileSync } from "node:child_process"
import { subscribe, unsubscribe } from "node:diagnostics_channel"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import type { ClientRequest, IncomingMessage, ServerResponse } from "node:http"
import { createServer, type Server } from "node:https"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { analyzeFood, balanceOf, connect, fakeStripe, keyWith, toolErrorCode } from "../support/clients.ts"
import { type FakeOpenAI, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const PHOTO_HOST = "127.0.0.2"
const photo = await makeImage(640, 480, "jpeg")
const photoBytes = Buffer.from(photo.base64, "base64")
const THREE_MB = 3_000_000

/** A self-signed certificate for 127.0.0.2, made for this run; its folder is removed when the scope closes. */
const certificate = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "morsel-photos-"))),
  (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
).pipe(Effect.map((folder) => {
  const key = join(folder, "key.pem")
  const cert = join(folder, "cert.pem")
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=morsel test photos", "-addext", `subjectAltName=IP:${PHOTO_HOST}`],
    { stdio: "ignore" }
  )
  return { key: readFileSync(key), cert: readFileSync(cert), certPath: cert }
}))

interface PhotoServer {
  readonly base: string
  readonly port: number
  /** Whether the client hung up on the 3 MB answer before all of it was written. */
  readonly bigCutOff: () => boolean
}

const startPhotoServer = (tls: { key: Buffer; cert: Buffer }) =>
  Effect.acquireRelease(
    Effect.async<{ server: Server; state: { bigCutOff: boolean } }>((resume) => {
      const state = { bigCutOff: false }
      const server = createServer(tls, (request: IncomingMessage, response: ServerResponse) => {
        const port = (server.address() as AddressInfo).port
        const path = request.url ?? "/"
        if (path === "/photo.jpg") response.writeHead(200, { "content-type": "image/jpeg" }).end(photoBytes)
        else if (path === "/moved") response.writeHead(302, { location: "/photo.jpg" }).end()
        else if (path === "/to-loopback") response.writeHead(302, { location: `https://127.0.0.1:${port}/photo.jpg` }).end()
        else if (path.startsWith("/loop")) response.writeHead(302, { location: `/loop${path.length}` }).end()
        else if (path === "/webp") response.writeHead(200, { "content-type": "image/webp" }).end(Buffer.from("RIFF\x24\x00\x00\x00WEBPVP8 "))
        else if (path === "/big") {
          // 3 MB without a Content-Length: only counting stops it.
          response.writeHead(200, { "content-type": "image/jpeg" })
          let sent = 0
          response.on("close", () => {
            state.bigCutOff = sent < THREE_MB || !response.writableFinished
          })
          const chunk = Buffer.alloc(64 * 1024, 0xff)
          const pump = () => {
            while (sent < THREE_MB) {
              sent += chunk.length
              if (!response.write(chunk)) return void response.once("drain", pump)
            }
            response.end()
          }
          pump()
        } else if (path === "/slow") {
          response.writeHead(200, { "content-type": "image/jpeg" })
          response.write(photoBytes.subarray(0, 3))
          const drip = setInterval(() => response.write(Buffer.from([0])), 200)
          response.on("close", () => clearInterval(drip))
        } else response.writeHead(404).end()
      })
      server.listen(0, PHOTO_HOST, () => resume(Effect.succeed({ server, state })))
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(
    Effect.map(({ server, state }): PhotoServer => {
      const port = (server.address() as AddressInfo).port
      return { base: `https://${PHOTO_HOST}:${port}`, port, bigCutOff: () => state.bigCutOff }
    })
  )

class Service extends Context.Tag("test/ImageFileService")<
  Service,
  { readonly url: string; readonly model: FakeOpenAI; readonly photos: PhotoServer; readonly key: string }
>() {}

const ServiceLive = Layer.scoped(
  Service,
  Effect.gen(function* () {
    const tls = yield* certificate
    const photos = yield* startPhotoServer(tls)
    const stripe = yield* fakeStripe
    const model = yield* startFakeOpenAI()
    const { url } = yield* startServer({
      env: {
        ...stripe.env,
        OPENAI_API_KEY: "sk-fake",
        OPENAI_BASE_URL: model.url,
        VISION_MODEL: "fake-vision-1",
        MCP_FILE_ALLOWED_HOSTS: PHOTO_HOST,
        MCP_FILE_CA_FILE: tls.certPath
      },
      dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited)
    })
    const key = yield* keyWith(url, stripe, 500)
    return { url, model, photos, key }
  })
)

let keys = 0
const idem = () => `file-test-key-${String(++keys).padStart(6, "0")}`
const fileRef = (download_url: string) => ({ download_url, file_id: "file-test-0001" })

/** The hosts of the outgoing HTTP(S) requests this process starts while `effect` runs (Node's own diagnostics channel). */
const requestsDuring = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const hosts: Array<string> = []
    const listener = (message: unknown) => {
      const request = (message as { request: ClientRequest }).request
      hosts.push(request.host)
    }
    subscribe("http.client.request.start", listener)
    const result = yield* Effect.ensuring(effect, Effect.sync(() => unsubscribe("http.client.request.start", listener)))
    return { result, hosts }
  })

describe("analyze_food with a file reference (image_file)", () => {
  layer(ServiceLive, { excludeTestServices: true, timeout: 180_000 })("on the running server", (it) => {
    it.scoped("tools/list declares image_file as a file parameter beside image_base64", () =>
      Effect.gen(function* () {
        const { url } = yield* Service
        const mcp = yield* connect(url)
        const { tools } = yield* Effect.promise(() => mcp.listTools())
        const tool = tools.find((candidate) => candidate.name === "analyze_food")!
        expect(tool._meta?.["openai/fileParams"]).toEqual(["image_file"])
        expect(tool.inputSchema.required).toEqual(["idempotency_key"])
        expect(tool.inputSchema.properties?.["image_file"]).toMatchObject({
          type: "object",
          properties: { download_url: { type: "string" }, file_id: { type: "string" } },
          required: ["download_url", "file_id"]
        })
        expect(tool.inputSchema.properties?.["image_base64"]).toBeDefined()
      }), 120_000)

    it.scoped("a file reference gives the result the same photo in base64 gives; the same key and the same file replay", () =>
      Effect.gen(function* () {
        const { url, model, photos, key } = yield* Service
        const mcp = yield* connect(url, { authorization: `Bearer ${key}` })
        const before = model.requests.length
        model.enqueue(Reply.answer(chickenRice))
        model.enqueue(Reply.answer(chickenRice))
        const asBase64 = yield* analyzeFood(mcp, { image_base64: photo.base64, mime_type: "image/jpeg", idempotency_key: idem() })
        const fileKey = idem()
        const { result: asFile, hosts } = yield* requestsDuring(analyzeFood(mcp, { image_file: fileRef(`${photos.base}/moved`), idempotency_key: fileKey }))
        expect(asFile.isError ?? false).toBe(false)
        expect(hosts).toEqual([PHOTO_HOST, PHOTO_HOST])
        // The same analysis but for its own request ID and time taken.
        const { request_id: _a, processing_ms: _c, ...fromBase64 } = asBase64.structuredContent as Record<string, unknown>
        const { request_id: _b, processing_ms: _d, ...fromFile } = asFile.structuredContent as Record<string, unknown>
        expect(fromFile).toEqual(fromBase64)
        expect(model.requests.length - before).toBe(2)
        // The fingerprint is of the photo's bytes: the same key with the same photo in base64 is a replay.
        const replay = yield* analyzeFood(mcp, { image_base64: photo.base64, mime_type: "image/jpeg", idempotency_key: fileKey })
        expect(replay.structuredContent).toEqual(asFile.structuredContent)
        const again = yield* analyzeFood(mcp, { image_file: fileRef(`${photos.base}/photo.jpg`), idempotency_key: fileKey })
        expect(again.structuredContent).toEqual(asFile.structuredContent)
        expect(model.requests.length - before).toBe(2)
      }), 120_000)

    it.scoped("a call that brings no way to pay gets the payment challenge before its file is fetched; its other arguments are checked first", () =>
      Effect.gen(function* () {
        const { url, model, photos } = yield* Service
        const mcp = yield* connect(url)
        const before = model.requests.length
        const { result, hosts } = yield* requestsDuring(analyzeFood(mcp, { image_file: fileRef(`${photos.base}/photo.jpg`), idempotency_key: idem() }))
        // This server sells against credit keys only: its 402 says so (with x402 on, it is the x402 challenge).
        expect([result.isError, toolErrorCode(result)]).toEqual([true, "x402_unavailable"])
        expect(hosts).toEqual([])
        // The same call with a photo in base64 gets the same challenge.
        const inline = yield* analyzeFood(mcp, { image_base64: photo.base64, mime_type: "image/jpeg", idempotency_key: idem() })
        expect(inline.structuredContent).toEqual(result.structuredContent)
        // A bad key, a file reference without its link or a photo given twice are refused as such, still unfetched.
        const refusals = [
          [{ image_file: fileRef(`${photos.base}/photo.jpg`), idempotency_key: "short" }, "idempotency_key"],
          [{ image_file: { file_id: "file-1" }, idempotency_key: idem() }, "image_file"],
          [{ image_file: fileRef(`${photos.base}/photo.jpg`), image_base64: photo.base64, idempotency_key: idem() }, "image_base64"],
          [{ image_file: fileRef(`${photos.base}/photo.jpg`), mime_type: "image/webp", idempotency_key: idem() }, "mime_type"]
        ] as const
        for (const [args, field] of refusals) {
          const { result: refused, hosts: asked } = yield* requestsDuring(analyzeFood(mcp, args))
          expect([field, toolErrorCode(refused), asked]).toEqual([field, "invalid_request", []])
          expect((refused.structuredContent as { error: { message: string } }).error.message).toContain(field)
        }
        expect(model.requests.length).toBe(before)
      }), 120_000)

    it.scoped("addresses that are not public, plain http and a redirect to loopback are refused before any request, with no model call", () =>
      Effect.gen(function* () {
        const { url, model, photos, key } = yield* Service
        const mcp = yield* connect(url, { authorization: `Bearer ${key}` })
        const balance = yield* balanceOf(url, key)
        const before = model.requests.length
        const refused = [
          [`https://127.0.0.1:${photos.port}/photo.jpg`, [], "not a public internet address"],
          ["https://10.0.0.1/photo.jpg", [], "not a public internet address"],
          ["https://169.254.169.254/latest/meta-data/", [], "not a public internet address"],
          ["https://[::ffff:169.254.169.254]/latest/meta-data/", [], "not a public internet address"],
          ["https://[fd00:ec2::254]/latest/meta-data/", [], "not a public internet address"],
          [`https://localhost:${photos.port}/photo.jpg`, [], "resolves to"],
          [`http://${PHOTO_HOST}:${photos.port}/photo.jpg`, [], "only https"],
          [`${photos.base}/to-loopback`, [PHOTO_HOST], "127.0.0.1 is not a public internet address"],
          [`${photos.base}/loop`, [PHOTO_HOST, PHOTO_HOST, PHOTO_HOST, PHOTO_HOST], "more than 3 redirects"]
        ] as const
        for (const [link, requested, reason] of refused) {
          const { result, hosts } = yield* requestsDuring(analyzeFood(mcp, { image_file: fileRef(link), idempotency_key: idem() }))
          expect([link, result.isError, toolErrorCode(result)]).toEqual([link, true, "invalid_request"])
          const message = (result.structuredContent as { error: { message: string } }).error.message
          expect(message).toMatch(/^image_file\.download_url: /)
          expect(message).toContain(reason)
          // Nothing left this process for a refused address: only the allowed photo server was ever asked.
          expect([link, hosts]).toEqual([link, requested])
        }
        expect(model.requests.length).toBe(before)
        expect(yield* balanceOf(url, key)).toBe(balance)
      }), 120_000)

    it.scoped("a 3 MB file is stopped at 2,000,000 bytes, a slow one at the deadline, a WebP file and both inputs at once are refused", () =>
      Effect.gen(function* () {
        const { url, model, photos, key } = yield* Service
        const mcp = yield* connect(url, { authorization: `Bearer ${key}` })
        const balance = yield* balanceOf(url, key)
        const before = model.requests.length

        const big = yield* analyzeFood(mcp, { image_file: fileRef(`${photos.base}/big`), idempotency_key: idem() })
        expect([big.isError, toolErrorCode(big)]).toEqual([true, "image_too_large"])
        expect((big.structuredContent as { error: { message: string } }).error.message).toContain("image_file.download_url: the file is over the limit of 2000000 bytes")
        expect(photos.bigCutOff()).toBe(true)

        const started = Date.now()
        const slow = yield* analyzeFood(mcp, { image_file: fileRef(`${photos.base}/slow`), idempotency_key: idem() })
        const took = Date.now() - started
        expect([slow.isError, toolErrorCode(slow)]).toEqual([true, "invalid_request"])
        expect((slow.structuredContent as { error: { message: string } }).error.message).toBe(
          "image_file.download_url: the download did not finish within 10000 ms"
        )
        expect(took).toBeGreaterThanOrEqual(10_000)
        console.log(`slow download refused after ${took} ms (deadline 10000 ms, the default)`)

        const webp = yield* analyzeFood(mcp, { image_file: fileRef(`${photos.base}/webp`), idempotency_key: idem() })
        expect([webp.isError, toolErrorCode(webp)]).toEqual([true, "unsupported_image"])

        const both = yield* analyzeFood(mcp, {
          image_file: fileRef(`${photos.base}/photo.jpg`),
          image_base64: photo.base64,
          mime_type: "image/jpeg",
          idempotency_key: idem()
        })
        expect([both.isError, toolErrorCode(both)]).toEqual([true, "invalid_request"])
        expect((both.structuredContent as { error: { message: string } }).error.message).toContain("image_base64")
        expect((both.structuredContent as { error: { message: string } }).error.message).toContain("image_file")

        const mismatch = yield* analyzeFood(mcp, { image_file: fileRef(`${photos.base}/photo.jpg`), mime_type: "image/png", idempotency_key: idem() })
        expect([mismatch.isError, toolErrorCode(mismatch)]).toEqual([true, "mime_mismatch"])

        expect(model.requests.length).toBe(before)
        expect(yield* balanceOf(url, key)).toBe(balance)
      }), 120_000)
  })
})
