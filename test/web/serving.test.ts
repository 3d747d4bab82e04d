import { request } from "node:http"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { send } from "../support/http.ts"
import { Server, serverLayer } from "../support/server.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"

const ServerUnderTest = serverLayer({
  dependencies: Layer.mergeAll(
    VisionModelLive,
    Layer.succeed(FoodDb, { matcherVersion: "test", match: () => Effect.succeedNone, ...noFoods }),
    FundingMemory({}),
    LimitsUnlimited
  )
})

/** node:http lets a test set Host, which fetch does not. */
const getWith = (url: string, headers: Record<string, string>) =>
  Effect.promise(
    () =>
      new Promise<number>((resolve, reject) => {
        const req = request(url, { method: "GET", headers }, (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        })
        req.on("error", reject)
        req.end()
      })
  )

describe("web page serving", () => {
  it.layer(ServerUnderTest, { timeout: 60_000 })((it) => {
    it.effect("the page, its script and style come from the service itself, with a same-origin policy", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const page = yield* Effect.promise(() => send(`${url}/`))
        expect(page.status).toBe(200)
        expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8")
        expect(page.text).toContain('<input id="photo" name="photo" type="file"')
        expect(page.text).toContain('href="/docs"')
        expect(page.text).not.toMatch(/(src|href)="https?:/)
        expect(page.headers.get("content-security-policy")).toContain("default-src 'self'")
        const script = yield* Effect.promise(() => send(`${url}/app.js`))
        expect([script.status, script.headers.get("content-type")]).toEqual([200, "text/javascript; charset=utf-8"])
        // The page talks to the service through morsel/client's browser build, served from the service itself.
        expect(script.text).toContain("/client/morsel-client.js")
        const client = yield* Effect.promise(() => send(`${url}/client/morsel-client.js`))
        expect([client.status, client.headers.get("content-type")]).toEqual([200, "text/javascript; charset=utf-8"])
        expect(client.text).toContain("/v1/analyze")
        const style = yield* Effect.promise(() => send(`${url}/app.css`))
        expect([style.status, style.headers.get("content-type")]).toEqual([200, "text/css; charset=utf-8"])
        // Every module the page loads (corrections and the meal in words beside the photo's) is served, with the same policy.
        expect(page.text).toContain('<script type="module" src="/words.js"></script>')
        expect(script.text).toContain('from "/correct.js"')
        for (const path of ["/result.js", "/photo.js", "/correct.js", "/more.js", "/words.js"]) {
          const module = yield* Effect.promise(() => send(`${url}${path}`))
          expect([path, module.status, module.headers.get("content-type")]).toEqual([path, 200, "text/javascript; charset=utf-8"])
          expect(module.headers.get("content-security-policy")).toContain("script-src 'self'")
        }
        const back = yield* Effect.promise(() => send(`${url}/checkout/success?order_id=x&session_id=cs_test_1`))
        expect(back.text).toBe(page.text)
        expect(page.text.length + script.text.length + style.text.length).toBeLessThan(60_000)
      }))

    it.effect("the service's own loopback origins are trusted on the port it was reached on; other names are not", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const port = new URL(url).port
        for (const name of ["localhost", "127.0.0.1"]) {
          expect(yield* getWith(`${url}/health`, { host: `${name}:${port}`, origin: `http://${name}:${port}` })).toBe(200)
        }
        // Another port on loopback is another program; a DNS name rebound to 127.0.0.1 is another site.
        expect(yield* getWith(`${url}/health`, { host: `localhost:${port}`, origin: "http://localhost:1" })).toBe(403)
        expect(yield* getWith(`${url}/health`, { host: `rebound.example:${port}`, origin: `http://rebound.example:${port}` })).toBe(403)
        expect(yield* getWith(`${url}/health`, { host: `localhost:${port}`, origin: "https://evil.example" })).toBe(403)
      }))
  })
})
