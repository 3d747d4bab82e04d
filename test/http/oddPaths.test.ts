// Every request is answered within a bound, whatever its path: the tool interface's spellings (a trailing slash,
// doubled slashes, capitals, a query) get the tool interface's answer, other paths 404 or 405.
import { describe, expect, it } from "@effect/vitest"
import { request } from "node:http"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"
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

/** Within this every answer must have arrived; a request still open then is a connection never answered. */
const BOUND_MS = 5_000

interface Seen {
  readonly status: number
  readonly text: string
}

/** One request over a fresh connection; "unanswered" when nothing came back within BOUND_MS. */
const ask = (url: string, method: string, path: string, body: string | undefined) =>
  new Promise<Seen | "unanswered">((resolve, reject) => {
    const headers: Record<string, string> = { accept: "application/json, text/event-stream" }
    if (body !== undefined) Object.assign(headers, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) })
    const outgoing = request(`${url}${path}`, { method, headers, agent: false })
    const timer = setTimeout(() => {
      outgoing.destroy()
      resolve("unanswered")
    }, BOUND_MS)
    outgoing.on("response", (incoming) => {
      let text = ""
      incoming.setEncoding("utf8").on("data", (chunk) => (text += chunk))
      incoming.on("end", () => {
        clearTimeout(timer)
        resolve({ status: incoming.statusCode ?? 0, text })
      })
    })
    outgoing.on("error", (error) => (outgoing.destroyed && !outgoing.writableEnded ? undefined : reject(error)))
    outgoing.end(body)
  })

const LIST_TOOLS = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
const TOOL_INTERFACE = ["/mcp", "/mcp/", "/mcp//", "/MCP", "/Mcp/", "/mcp?x=1", "/mcp/?x=1"]
const ELSEWHERE = ["/mcp/foo", "/mcpx", "/v1/analyze/", "//v1/health", "/v1//analyze", "/nowhere/"]
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]

describe("odd paths", () => {
  it.layer(ServerUnderTest, { timeout: 120_000 })((it) => {
    it.effect(`every spelling of the tool interface is answered within ${BOUND_MS} ms for every method, POST by the tool interface`, () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        for (const path of TOOL_INTERFACE) {
          for (const method of METHODS) {
            const seen = yield* Effect.promise(() => ask(url, method, path, method === "GET" ? undefined : LIST_TOOLS))
            const what = `${method} ${path}`
            expect(seen, what).not.toBe("unanswered")
            if (seen === "unanswered") continue
            if (method === "POST") {
              expect(seen.status, `${what}: ${seen.text.slice(0, 200)}`).toBe(200)
              expect(JSON.parse(seen.text).result.tools.map((tool: { name: string }) => tool.name), what).toContain("analyze_food")
            } else {
              expect(seen.status, what).toBe(405)
              expect(JSON.parse(seen.text).error.message, what).toMatch(/use POST/)
            }
          }
        }
      }))

    it.effect(`other odd paths are answered within ${BOUND_MS} ms for every method, with a JSON answer and never a 5xx`, () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        for (const path of ELSEWHERE) {
          for (const method of METHODS) {
            const seen = yield* Effect.promise(() => ask(url, method, path, method === "GET" ? undefined : "{}"))
            const what = `${method} ${path}`
            expect(seen, what).not.toBe("unanswered")
            if (seen === "unanswered") continue
            expect(seen.status, `${what}: ${seen.text.slice(0, 200)}`).toBeGreaterThanOrEqual(400)
            expect(seen.status, what).toBeLessThan(500)
            expect(JSON.parse(seen.text).error.code, what).toEqual(expect.any(String))
          }
        }
        // A path nothing serves says so.
        const nowhere = yield* Effect.promise(() => ask(url, "POST", "/mcp/foo", "{}"))
        expect(nowhere).toMatchObject({ status: 404 })
      }))
  })
})
