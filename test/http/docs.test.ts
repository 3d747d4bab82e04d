// GET /docs, the API reference: 3.3 MB of page sent compressed as the browser's Accept-Encoding allows (brotli, else
// gzip, else as it is), the same page in each, with an ETag that answers 304 and a cache time.
import { request } from "node:http"
import { brotliDecompressSync, gunzipSync } from "node:zlib"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { chooseEncoding } from "../../src/http/docs.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const vision = Layer.succeed(VisionModel, { model: "scripted", analyze: () => Effect.succeed(chickenRice) })
const dependencies = Layer.mergeAll(vision, FoodDbEmpty, FundingMemory({}), LimitsUnlimited)

interface Got {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: Buffer
}

/** A GET with exactly these headers (fetch would add its own Accept-Encoding and decompress). */
const get = (url: string, headers: Record<string, string>) =>
  Effect.async<Got>((resume) => {
    const sent = request(url, { headers }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) })))
    })
    sent.end()
  })

describe("GET /docs", () => {
  it.scopedLive("brotli, gzip or none by Accept-Encoding, the same page in each; an ETag answers 304; cached for an hour", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies })
      const plain = yield* get(`${url}/docs`, {})
      expect(plain.status).toBe(200)
      expect(plain.headers["content-encoding"]).toBeUndefined()
      expect(plain.headers["content-type"]).toBe("text/html; charset=utf-8")
      expect(plain.body.length).toBeGreaterThan(3_000_000)
      expect(plain.body.toString()).toContain("api-reference")

      const br = yield* get(`${url}/docs`, { "accept-encoding": "gzip, deflate, br" })
      expect(br.headers["content-encoding"]).toBe("br")
      expect(br.body.length).toBeLessThan(1_000_000)
      expect(brotliDecompressSync(br.body).equals(plain.body)).toBe(true)

      const gz = yield* get(`${url}/docs`, { "accept-encoding": "gzip" })
      expect(gz.headers["content-encoding"]).toBe("gzip")
      expect(gz.body.length).toBeLessThan(1_000_000)
      expect(gunzipSync(gz.body).equals(plain.body)).toBe(true)

      for (const answer of [plain, br, gz]) {
        expect(answer.headers["vary"]).toContain("Accept-Encoding")
        expect(answer.headers["cache-control"]).toBe("public, max-age=3600")
        expect(answer.headers["etag"]).toBe(plain.headers["etag"])
      }
      const again = yield* get(`${url}/docs`, { "accept-encoding": "br", "if-none-match": String(plain.headers["etag"]) })
      expect(again.status).toBe(304)
      expect(again.body.length).toBe(0)
      const stale = yield* get(`${url}/docs`, { "accept-encoding": "br", "if-none-match": '"another"' })
      expect(stale.status).toBe(200)
    }), 120_000)

  it("reads Accept-Encoding as browsers and proxies write it", () => {
    expect(chooseEncoding("gzip, deflate, br, zstd")).toBe("br")
    expect(chooseEncoding("gzip;q=1.0, br;q=0")).toBe("gzip")
    expect(chooseEncoding("identity")).toBe("identity")
    expect(chooseEncoding(undefined)).toBe("identity")
    expect(chooseEncoding("*")).toBe("br")
    expect(chooseEncoding("*;q=0, gzip")).toBe("gzip")
  })
})
