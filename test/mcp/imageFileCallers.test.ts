// A photo given as a file reference (image_file) is fetched only for a caller who could pay for its analysis: a key
// with a credit left, a payment the chain would take, or a retry of the caller's own request. Made-up keys (past
// their address's allowance too), a key without credits, payments that do not decode, a wallet without funds and a
// server without x402 cost the server no download at all, counted by the file server itself; and at most
// MAX_CONCURRENT_DOWNLOADS photos are fetched at once. Through the official MCP client, all traffic on 127.0.0.0/8.
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer } from "node:https"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, layer } from "@effect/vitest"
import type { CallToolResult } from "@modelcontextprotocol/client"
import { Context, Effect, Layer } from "effect"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { MAX_CONCURRENT_DOWNLOADS } from "../../src/mcp/files/imageFile.ts"
import { FundingLive } from "../../src/server.ts"
import { analyzeFood, balanceOf, connect, fakeStripe, keyWith, toolErrorCode } from "../support/clients.ts"
import { type FakeOpenAI, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { memorySeam, type PaymentChain, TestChain } from "../support/memoryChain.ts"
import { withinOneMinute } from "../support/minute.ts"
import { startServer } from "../support/server.ts"
import { challengeOf, signPayment, withBrokenSignature, x402Env } from "../support/x402.ts"

const PHOTO_HOST = "127.0.0.2"
const photo = await makeImage(640, 480, "jpeg")
const photoBytes = Buffer.from(photo.base64, "base64")

/** The file server's own count of the files it began to send, and a path that waits until the test lets it answer. */
interface PhotoServer {
  readonly base: string
  readonly served: () => number
  readonly held: () => number
  readonly release: () => void
  readonly caPath: string
}

const startPhotoServer = Effect.acquireRelease(
  Effect.async<{ readonly photos: PhotoServer; readonly close: () => Promise<void> }>((resume) => {
    const folder = mkdtempSync(join(tmpdir(), "morsel-callers-"))
    const key = join(folder, "key.pem")
    const cert = join(folder, "cert.pem")
    execFileSync(
      "openssl",
      ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=morsel test photos", "-addext", `subjectAltName=IP:${PHOTO_HOST}`],
      { stdio: "ignore" }
    )
    let served = 0
    const waiting: Array<ServerResponse> = []
    const server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (request: IncomingMessage, response: ServerResponse) => {
      served++
      if (request.url === "/held") waiting.push(response)
      else response.writeHead(200, { "content-type": "image/jpeg" }).end(photoBytes)
    })
    server.listen(0, PHOTO_HOST, () =>
      resume(
        Effect.succeed({
          photos: {
            base: `https://${PHOTO_HOST}:${(server.address() as AddressInfo).port}`,
            served: () => served,
            held: () => waiting.length,
            // Not a photo: the held calls end in a refusal of their own, with no model call and nothing charged.
            release: () => {
              for (const response of waiting.splice(0)) response.writeHead(200).end("not a photo")
            },
            caPath: cert
          },
          close: () =>
            new Promise<void>((done) => {
              server.closeAllConnections()
              server.close(() => {
                rmSync(folder, { recursive: true, force: true })
                done()
              })
            })
        })
      )
    )
  }),
  ({ close }) => Effect.promise(close)
).pipe(Effect.map(({ photos }) => photos))

class Service extends Context.Tag("test/ImageFileCallers")<
  Service,
  {
    readonly url: string
    readonly withoutX402: string
    readonly model: FakeOpenAI
    readonly photos: PhotoServer
    readonly chain: PaymentChain
    readonly funded: string
    readonly unfunded: string
  }
>() {}

const ServiceLive = Layer.scoped(
  Service,
  Effect.gen(function* () {
    const photos = yield* startPhotoServer
    const chain = yield* TestChain
    const stripe = yield* fakeStripe
    const model = yield* startFakeOpenAI()
    const files = { MCP_FILE_ALLOWED_HOSTS: PHOTO_HOST, MCP_FILE_CA_FILE: photos.caPath }
    const common = { ...stripe.env, ...files, OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: model.url, VISION_MODEL: "fake-vision-1" }
    const dependencies = Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited)
    const { url } = yield* startServer({ env: { ...x402Env(chain), ...common }, dependencies, chain: yield* memorySeam })
    const { url: withoutX402 } = yield* startServer({ env: common, dependencies })
    const funded = yield* keyWith(url, stripe, 500)
    const unfunded = yield* keyWith(url, stripe, 0)
    return { url, withoutX402, model, photos, chain, funded, unfunded }
  })
).pipe(Layer.provide(TestChain.memory({ payers: 2 })))

/** A tool error's code: in structuredContent, or beside an x402 challenge (which is then the structuredContent) in the second text. */
const codeOf = (result: CallToolResult): unknown => {
  const second = result.content[1]
  return toolErrorCode(result) ?? (second?.type === "text" ? JSON.parse(second.text).error?.code : undefined)
}

let keys = 0
const idem = () => `file-caller-key-${String(++keys).padStart(6, "0")}`
const fileRef = (download_url: string) => ({ download_url, file_id: "file-test-0001" })

describe("who has a file fetched", () => {
  layer(ServiceLive, { excludeTestServices: true, timeout: 240_000 })("on running servers", (it) => {
    it.scoped("made-up keys, a key without credits, junk payments, a wallet without funds and a server without x402: no download", () =>
      Effect.gen(function* () {
        const { chain, model, photos, unfunded, url, withoutX402 } = yield* Service
        const link = fileRef(`${photos.base}/photo.jpg`)
        const before = model.requests.length
        const codes = new Map<string, number>()
        const tally = (code: unknown) => codes.set(String(code), (codes.get(String(code)) ?? 0) + 1)

        // 40 made-up keys from one address: 401 until its allowance for unknown keys is spent, then 429. The allowance
        // is counted per minute of the clock: the keys are sent within one (a storm across a minute's end met two
        // allowances, 40 × 401, on a slow PostgreSQL pass).
        yield* withinOneMinute(30_000)
        for (let i = 0; i < 40; i++) {
          const mcp = yield* connect(url, { authorization: `Bearer ${newCreditKey(true)}` })
          tally(codeOf(yield* analyzeFood(mcp, { image_file: link, idempotency_key: idem() })))
        }
        expect(codes.get("invalid_key")).toBeGreaterThan(0)
        expect(codes.get("rate_limited")).toBeGreaterThan(0)
        expect([...codes.keys()].sort()).toEqual(["invalid_key", "rate_limited"])
        expect(photos.served()).toBe(0)

        // A key that exists but holds no credit.
        const poor = yield* connect(url, { authorization: `Bearer ${unfunded}` })
        expect(codeOf(yield* analyzeFood(poor, { image_file: link, idempotency_key: idem() }))).toBe("insufficient_credits")

        // Payments that do not decode, one with a broken signature, and a valid signature from a wallet with no USDC.
        const anonymous = yield* connect(url)
        const unpaid = yield* analyzeFood(anonymous, { image_file: link, idempotency_key: idem() })
        expect(codeOf(unpaid)).toBe("payment_required")
        const challenge = challengeOf(Buffer.from(JSON.stringify(unpaid.structuredContent)).toString("base64"))
        const signed = yield* Effect.promise(() => signPayment(chain.accounts.payers[0]!, challenge))
        const pauper = yield* Effect.promise(() => signPayment(chain.accounts.pauper, challenge))
        for (const payment of [{}, { x402Version: 2 }, "junk", [1, 2, 3], withBrokenSignature(signed), pauper]) {
          const refused = yield* analyzeFood(anonymous, { image_file: link, idempotency_key: idem() }, { "x402/payment": payment })
          expect([JSON.stringify(payment).slice(0, 40), codeOf(refused)]).toEqual([JSON.stringify(payment).slice(0, 40), "invalid_payment"])
        }

        // A server without x402: any payment at all is refused as such.
        const elsewhere = yield* connect(withoutX402)
        for (const payment of [{}, { junk: true }, signed]) {
          const refused = yield* analyzeFood(elsewhere, { image_file: link, idempotency_key: idem() }, { "x402/payment": payment })
          expect(codeOf(refused)).toBe("x402_unavailable")
        }
        expect(photos.served()).toBe(0)
        expect(model.requests.length).toBe(before)
      }), 240_000)

    it.scoped("a funded key and a funded wallet have the file fetched once per call; a retry of the caller's own request is fetched to be replayed", () =>
      Effect.gen(function* () {
        const { chain, funded, model, photos, url } = yield* Service
        const link = fileRef(`${photos.base}/photo.jpg`)
        const start = photos.served()
        model.enqueue(Reply.answer(chickenRice))
        model.enqueue(Reply.answer(chickenRice))
        const paying = yield* connect(url, { authorization: `Bearer ${funded}` })
        const key = idem()
        const first = yield* analyzeFood(paying, { image_file: link, idempotency_key: key })
        expect(first.isError ?? false).toBe(false)
        expect(photos.served() - start).toBe(1)
        const replay = yield* analyzeFood(paying, { image_file: link, idempotency_key: key })
        expect(replay.structuredContent).toEqual(first.structuredContent)
        expect(photos.served() - start).toBe(2)
        expect(yield* balanceOf(url, funded)).toBe(499)

        const anonymous = yield* connect(url)
        const unpaid = yield* analyzeFood(anonymous, { image_file: link, idempotency_key: idem() })
        const payment = yield* Effect.promise(() =>
          signPayment(chain.accounts.payers[1]!, challengeOf(Buffer.from(JSON.stringify(unpaid.structuredContent)).toString("base64")))
        )
        const paid = yield* analyzeFood(anonymous, { image_file: link, idempotency_key: idem() }, { "x402/payment": payment })
        expect([paid.isError ?? false, toolErrorCode(paid)]).toEqual([false, undefined])
        expect(photos.served() - start).toBe(3)
      }), 240_000)

    it.scoped(`at most ${MAX_CONCURRENT_DOWNLOADS} files are fetched at once; a call beyond them is refused at once with capacity_limited`, () =>
      Effect.gen(function* () {
        const { funded, model, photos, url } = yield* Service
        const paying = yield* connect(url, { authorization: `Bearer ${funded}` })
        const start = photos.served()
        const before = model.requests.length
        const balance = Number(yield* balanceOf(url, funded))
        const held = yield* Effect.forkScoped(
          Effect.all(
            Array.from({ length: MAX_CONCURRENT_DOWNLOADS }, () => analyzeFood(paying, { image_file: fileRef(`${photos.base}/held`), idempotency_key: idem() })),
            { concurrency: "unbounded" }
          )
        )
        while (photos.held() < MAX_CONCURRENT_DOWNLOADS) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        const beyond = yield* analyzeFood(paying, { image_file: fileRef(`${photos.base}/photo.jpg`), idempotency_key: idem() })
        expect(toolErrorCode(beyond)).toBe("capacity_limited")
        expect(photos.served() - start).toBe(MAX_CONCURRENT_DOWNLOADS)
        // A photo in base64 takes no download's place: it is analysed meanwhile.
        model.enqueue(Reply.answer(chickenRice))
        const inline = yield* analyzeFood(paying, { image_base64: photo.base64, mime_type: "image/jpeg", idempotency_key: idem() })
        expect([inline.isError ?? false, toolErrorCode(inline)]).toEqual([false, undefined])
        photos.release()
        const ended = yield* held.await
        expect(ended._tag).toBe("Success")
        if (ended._tag === "Success") expect(ended.value.map(toolErrorCode)).toEqual(Array(MAX_CONCURRENT_DOWNLOADS).fill("unsupported_image"))
        expect(model.requests.length - before).toBe(1)
        expect(yield* balanceOf(url, funded)).toBe(balance - 1)
      }), 240_000)
  })
})
