// Made-up keys are fenced on the free food doors too: GET /v1/foods, GET /v1/foods/{id}, POST /v1/nutrition (its
// lane and the HttpApi stack) and MCP's search_foods and food_nutrition count a key the service does not know against
// its client address's allowance for unknown keys (the one the analysis and credit endpoints count, 30 a minute), then
// answer 429 rate_limited with a minute's wait; a paying key from the same address is served.
import { request } from "node:http"
import type { CallToolResult } from "@modelcontextprotocol/client"
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { realPostgresUrl } from "../support/database.ts"
import { connect, fakeStripe, keyWith, toolErrorCode } from "../support/clients.ts"
import { isRecord } from "../support/http.ts"
import { withinOneMinute } from "../support/minute.ts"
import { startServer } from "../support/server.ts"

class Service extends Context.Tag("test/FoodFenceService")<Service, { readonly url: string; readonly paid: string }>() {}

// Every request comes through a proxy of ours on 127.0.0.1 that names the client, so MCP's clients can name it too.
const ServiceLive = Layer.scoped(
  Service,
  Effect.gen(function* () {
    const stripe = yield* fakeStripe
    const { url } = yield* startServer({
      env: { ...stripe.env, TRUSTED_PROXIES: "127.0.0.1" },
      dependencies: Layer.mergeAll(VisionModelLive, FoodDbMemory(shippedFoods()), FundingLive, LimitsUnlimited)
    })
    const paid = yield* keyWith(url, stripe, 500)
    return { url, paid }
  })
)

interface Answer {
  readonly status: number
  readonly code: unknown
  readonly retryAfter: string | undefined
}

/**
 * One REST call for `client` with `key`. `chunked` sends the body without a length: the nutrition lane leaves such a
 * request to the HttpApi stack.
 */
const restFor = (url: string, client: string, key: string, path: string, body?: unknown, chunked = false): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body)
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, "x-forwarded-for": client }
    if (text !== undefined) {
      headers["content-type"] = "application/json"
      if (!chunked) headers["content-length"] = String(Buffer.byteLength(text))
    }
    const req = request(`${url}${path}`, { method: text === undefined ? "GET" : "POST", headers }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => {
        let parsed: unknown
        try {
          parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          parsed = undefined
        }
        const code = isRecord(parsed) && isRecord(parsed["error"]) ? parsed["error"]["code"] : undefined
        const retry = res.headers["retry-after"]
        resolve({ status: res.statusCode ?? 0, code, retryAfter: typeof retry === "string" ? retry : undefined })
      })
    })
    req.on("error", reject)
    if (text !== undefined && chunked) {
      req.write(text.slice(0, 5))
      req.end(text.slice(5))
    } else req.end(text)
  })

/** A tool's answer as a REST one: success 200, else its error code and retry_after_seconds. */
const asAnswer = (result: CallToolResult): Answer => {
  if (result.isError !== true) return { status: 200, code: undefined, retryAfter: undefined }
  const code = toolErrorCode(result)
  const retry = isRecord(result.structuredContent) ? result.structuredContent["retry_after_seconds"] : undefined
  return { status: code === "invalid_key" ? 401 : code === "rate_limited" ? 429 : 0, code, retryAfter: retry === undefined ? undefined : String(retry) }
}

const tool = (url: string, client: string, key: string, name: string, args: Record<string, unknown>) =>
  Effect.scoped(
    Effect.flatMap(connect(url, { authorization: `Bearer ${key}`, "x-forwarded-for": client }), (mcp) =>
      Effect.promise(async () => asAnswer((await mcp.callTool({ name, arguments: args })) as CallToolResult))
    )
  )

const items = [{ query: "rice, white, cooked", grams: 150 }]

/** Every food door that takes a key, each called once for `client` with `key`. */
const doors = (url: string) =>
  [
    ["GET /v1/foods", (client: string, key: string) => Effect.promise(() => restFor(url, client, key, "/v1/foods?q=rice"))],
    ["GET /v1/foods/{id}", (client: string, key: string) => Effect.promise(() => restFor(url, client, key, "/v1/foods/20045"))],
    ["POST /v1/nutrition (lane)", (client: string, key: string) => Effect.promise(() => restFor(url, client, key, "/v1/nutrition", { items }))],
    ["POST /v1/nutrition (stack)", (client: string, key: string) => Effect.promise(() => restFor(url, client, key, "/v1/nutrition", { items }, true))],
    ["MCP search_foods", (client: string, key: string) => tool(url, client, key, "search_foods", { query: "rice" })],
    ["MCP food_nutrition", (client: string, key: string) => tool(url, client, key, "food_nutrition", { items })]
  ] as const

const LIMIT = 30
const STORM = 65

describe(`unknown keys on the food doors (${realPostgresUrl ? "real PostgreSQL" : "PGlite"})`, () => {
  layer(ServiceLive, { excludeTestServices: true })("on the running server", (it) => {
    it.effect(`${STORM} made-up keys from one address, round the six food doors: the address's allowance answers 401, the rest 429 rate_limited; a paying key is served`, () =>
      Effect.gen(function* () {
        const { url, paid } = yield* Service
        const all = doors(url)
        // One clock minute for the whole storm, so that the allowance is exactly one minute's.
        yield* withinOneMinute(45_000)
        const answers: Array<{ readonly door: string } & Answer> = []
        for (let i = 0; i < STORM; i++) {
          const [door, call] = all[i % all.length]!
          answers.push({ door, ...(yield* call("203.0.113.50", newCreditKey(true))) })
        }
        expect(answers.slice(0, LIMIT).filter((a) => a.status !== 401 || a.code !== "invalid_key")).toEqual([])
        // Past the allowance every door refuses, with a minute's wait.
        const refused = answers.slice(LIMIT)
        expect(refused.filter((a) => a.status !== 429 || a.code !== "rate_limited" || a.retryAfter !== "60")).toEqual([])
        expect(new Set(refused.map((a) => a.door)).size).toBe(all.length)

        // The paying key from the storm's own address is served on every door; a made-up key elsewhere is still told 401.
        for (const [door, call] of all) expect({ door, status: (yield* call("203.0.113.50", paid)).status }).toEqual({ door, status: 200 })
        for (const [door, call] of all) expect({ door, status: (yield* call("203.0.113.51", newCreditKey(true))).status }).toEqual({ door, status: 401 })
      }),
      180_000
    )
  })
})
