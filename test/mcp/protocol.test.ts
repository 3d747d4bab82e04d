// The tool interface's protocol: the 2026-07-28 revision's server card and caching hints, Host and Origin checks, the caller's trace continued.
import { execFile } from "node:child_process"
import { readFileSync } from "node:fs"
import { request as httpRequest } from "node:http"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Ref, Scope } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { PROTOCOL_VERSIONS } from "../../src/mcp/McpRoute.ts"
import { analyzeFood, connect, toolErrorCode } from "../support/clients.ts"
import { makeImage } from "../support/images.ts"
import { otlpReceiver, spansOf } from "../support/otlp.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const vision = Layer.succeed(VisionModel, { model: "scripted", analyze: () => Effect.succeed(chickenRice) })
const dependencies = Layer.mergeAll(vision, FoodDbEmpty, FundingMemory({ alice: 5 }), LimitsUnlimited)
const photo = await makeImage(64, 48, "png")
const image = { image_base64: photo.base64, mime_type: photo.mime }

const CURRENT = "2026-07-28"
const envelope = {
  "io.modelcontextprotocol/protocolVersion": CURRENT,
  "io.modelcontextprotocol/clientInfo": { name: "raw-test", version: "1" },
  "io.modelcontextprotocol/clientCapabilities": {}
}

/** A raw POST to /mcp with any Host and Origin (fetch would not send a foreign Host), answering status and JSON body. */
const post = (url: string, body: { method: string; params?: Record<string, unknown> }, headers: Record<string, string> = {}) =>
  Effect.async<{ status: number; body: unknown }>((resume) => {
    const text = JSON.stringify({ jsonrpc: "2.0", id: 1, ...body })
    const req = httpRequest(`${url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": CURRENT,
        "mcp-method": body.method,
        ...headers
      }
    })
    req.on("response", (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8")
        let parsed: unknown
        try {
          parsed = JSON.parse(raw)
        } catch {
          parsed = raw
        }
        resume(Effect.succeed({ status: res.statusCode ?? 0, body: parsed }))
      })
    })
    req.end(text)
  })

describe("MCP protocol", () => {
  it.scoped("2026-07-28: server/discover names the server with its icon and instructions; discovery and the tool list carry public cache hints", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies })
      const discover = yield* post(url, { method: "server/discover", params: { _meta: envelope } })
      expect(discover.status).toBe(200)
      expect(discover.body).toMatchObject({
        result: {
          supportedVersions: expect.arrayContaining([CURRENT]),
          capabilities: { tools: {} },
          instructions: expect.stringContaining("0.01 USDC"),
          ttlMs: 3_600_000,
          cacheScope: "public",
          _meta: {
            "io.modelcontextprotocol/serverInfo": {
              name: "morsel",
              icons: [{ mimeType: "image/svg+xml", src: expect.stringMatching(/^data:image\/svg\+xml;base64,/) }]
            }
          }
        }
      })
      const list = yield* post(url, { method: "tools/list", params: { _meta: envelope } })
      expect(list.body).toMatchObject({
        result: {
          ttlMs: 3_600_000,
          cacheScope: "public",
          tools: [
            { name: "analyze_food", title: "Analyze a food photo", icons: [{ mimeType: "image/svg+xml" }] },
            { name: "search_foods", title: "Search foods", icons: [{ mimeType: "image/svg+xml" }] },
            { name: "food_nutrition", title: "Nutrition of named foods", icons: [{ mimeType: "image/svg+xml" }] }
          ]
        }
      })
      const [tool] = (list.body as { result: { tools: Array<{ description: string }> } }).result.tools
      // An agent learns from the description when to call it and what it costs.
      expect(tool?.description).toMatch(/Use it when the user shares a photo/)
      expect(tool?.description).toMatch(/Cost: 0\.01 USDC or one prepaid credit per successful analysis/)

      // A header that disagrees with the body is refused before anything runs.
      const mismatch = yield* post(url, { method: "tools/list", params: { _meta: envelope } }, { "mcp-method": "tools/call" })
      expect(mismatch.status).toBe(400)
    }), 120_000)

  it.scoped("DNS rebinding: a page on a rebound name or a foreign origin is refused with 403; this server's own and trusted origins are served", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({
        dependencies,
        env: { PUBLIC_BASE_URL: "https://morsel.example", TRUSTED_ORIGINS: "https://app.example.org" }
      })
      const port = new URL(url).port
      const discover = { method: "server/discover", params: { _meta: envelope } }
      const rebound = yield* post(url, discover, { host: `evil.example:${port}`, origin: `http://evil.example:${port}` })
      expect([rebound.status, rebound.body]).toEqual([403, expect.objectContaining({ error: expect.objectContaining({ code: "untrusted_origin" }) })])
      expect((yield* post(url, discover, { origin: "http://evil.example" })).status).toBe(403)
      expect((yield* post(url, discover, { host: `localhost:${port}`, origin: `http://localhost:${port}` })).status).toBe(200)
      expect((yield* post(url, discover, { origin: "https://morsel.example" })).status).toBe(200)
      expect((yield* post(url, discover, { origin: "https://app.example.org" })).status).toBe(200)
      // Agents are not browsers: without an Origin, any Host name of this server is served (proxies, internal names).
      expect((yield* post(url, discover, { host: `morsel.internal:${port}` })).status).toBe(200)
    }), 120_000)

  it.scoped("a bad image is told in the tool's words (image_base64), on the current revision", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies })
      const mcp = yield* connect(url, { authorization: "Bearer memory_alice" })
      expect(mcp.getNegotiatedProtocolVersion()).toBe(CURRENT)
      const bad = yield* analyzeFood(mcp, { ...image, image_base64: `data:image/png;base64,${photo.base64}`, idempotency_key: "mcp-words-000000001" })
      expect(toolErrorCode(bad)).toBe("invalid_base64")
      expect(JSON.stringify(bad.structuredContent)).toContain("image_base64 must be raw base64")
      expect(JSON.stringify(bad.structuredContent)).not.toContain("imageBase64")
    }), 120_000)
})

describe("MCP traces", () => {
  it.scoped("a traceparent in the call's _meta continues the caller's trace: the tool's span is its child", () =>
    Effect.gen(function* () {
      const receiver = yield* otlpReceiver
      const serverScope = yield* Scope.make()
      const { url } = yield* startServer({ dependencies, env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } }).pipe(Scope.extend(serverScope))
      const mcp = yield* connect(url, { authorization: "Bearer memory_alice" }).pipe(Scope.extend(serverScope))
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
      const parentId = "00f067aa0ba902b7"
      const result = yield* analyzeFood(mcp, { ...image, idempotency_key: "mcp-trace-00000001" }, { traceparent: `00-${traceId}-${parentId}-01` })
      expect(result.isError ?? false).toBe(false)
      // Closing the server flushes the exporter.
      yield* Scope.close(serverScope, Exit.void)
      const spans = spansOf(yield* Ref.get(receiver.bodies))
      const tool = spans.find((s) => s.name === "mcp tools/call analyze_food")
      expect(tool).toMatchObject({ traceId, parentSpanId: parentId })
    }), 120_000)
})

/** The JSON documents of a text that holds several back to back (curl adds no line break after a body). */
const jsonDocuments = (text: string): Array<Record<string, unknown>> => {
  const documents: Array<Record<string, unknown>> = []
  let depth = 0
  let start = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === "\\") i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === "{") {
      if (depth++ === 0) start = i
    } else if (c === "}" && --depth === 0) documents.push(JSON.parse(text.slice(start, i + 1)) as Record<string, unknown>)
  }
  return documents
}

describe("MCP revisions", () => {
  it.scoped("server/discover lists every revision the server speaks, and each 2025 one is answered by initialize as itself", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies })
      const discover = yield* post(url, { method: "server/discover", params: { _meta: envelope } })
      expect(discover.body).toMatchObject({ result: { supportedVersions: ["2026-07-28", "2025-11-25", "2025-06-18"] } })
      expect(PROTOCOL_VERSIONS).toEqual(["2026-07-28", "2025-11-25", "2025-06-18"])
      const initialize = (protocolVersion: string) =>
        post(
          url,
          { method: "initialize", params: { protocolVersion, capabilities: {}, clientInfo: { name: "raw-test", version: "1" } } },
          { "mcp-protocol-version": protocolVersion, "mcp-method": "" }
        )
      for (const version of ["2025-11-25", "2025-06-18"]) {
        expect((yield* initialize(version)).body, version).toMatchObject({ result: { protocolVersion: version } })
      }
      // An older client is offered the newest 2025 revision (it may then go, or speak that).
      expect((yield* initialize("2025-03-26")).body).toMatchObject({ result: { protocolVersion: "2025-11-25" } })
    }), 120_000)

  it.scopedLive("docs/mcp.md's raw 2026-07-28 requests run as written with curl: discovery, then a free tool call", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies })
      const page = readFileSync(join(import.meta.dirname, "../../docs/mcp.md"), "utf8")
      const block = /\*\*A raw 2026-07-28 request\*\*[\s\S]*?```sh\n([\s\S]*?)```/.exec(page)?.[1]
      expect(block).toContain("server/discover")
      const script = (block ?? "").replaceAll("http://127.0.0.1:8787", url)
      const run = yield* Effect.async<{ code: number; stdout: string; stderr: string }>((resume) => {
        execFile("bash", ["-c", `set -eo pipefail\n${script}`], { env: { PATH: process.env["PATH"] ?? "" }, timeout: 60_000 }, (error, stdout, stderr) =>
          resume(Effect.succeed({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr }))
        )
      })
      expect(run.code, run.stderr).toBe(0)
      // Two answers, as curl prints them: JSON documents back to back.
      const answers = jsonDocuments(run.stdout)
      expect(answers).toHaveLength(2)
      expect(answers[0]).toMatchObject({ id: 1, result: { supportedVersions: PROTOCOL_VERSIONS } })
      expect(answers[1], JSON.stringify(answers[1])).toMatchObject({ id: 2, result: { structuredContent: { foods: expect.any(Array) } } })
      expect(answers[1]).not.toHaveProperty("result.isError", true)
    }), 120_000)
})
