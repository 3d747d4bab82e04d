/** The tool interface at /mcp: a stateless MCP server over Streamable HTTP per request, calling the same analysis as REST. */
import { HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError
} from "@modelcontextprotocol/sdk/types.js"
import { Cause, Effect, Either, Exit, Option, Runtime } from "effect"
import { AnalyzeRequests } from "../analysis/http.ts"
import { AppConfig } from "../config.ts"
import { SERVICE_VERSION } from "../http/health.ts"
import { MAX_BODY_BYTES } from "../http/transport.ts"
import { decodeInput, errorResult, paymentSignatureOf, successResult, TOOL_NAME, toolDefinition } from "./tool.ts"

export const MCP_PATH = "/mcp"

const INSTRUCTIONS =
  "morsel estimates the nutrition of a food photo with the analyze_food tool. Pay per successful call with a prepaid credit key " +
  "(Authorization: Bearer header on the connection) or per call with x402 (params._meta[\"x402/payment\"])."

/** Stateless servers keep no stream open: GET (server-sent events) and DELETE (sessions) are not offered. */
const methodNotAllowed = HttpServerResponse.unsafeJson(
  { jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: this MCP server is stateless; use POST" }, id: null },
  { status: 405, headers: { allow: "POST" } }
)

export const McpRoute = HttpLayerRouter.use((router) =>
  Effect.gen(function* () {
    const requests = yield* AnalyzeRequests
    const settings = yield* AppConfig
    const tool = toolDefinition(settings.publicBaseUrl)

    /** One tool call through the shared pipeline; every typed failure becomes a tool error, never a protocol error. */
    const analyzeFood = (authorization: Option.Option<string>, args: unknown, meta: Readonly<Record<string, unknown>> | undefined) =>
      Effect.gen(function* () {
        const input = decodeInput(args)
        if (Either.isLeft(input)) return errorResult(input.left)
        const { idempotency_key, ...payload } = input.right
        return yield* requests
          .analyze({ idempotencyKey: idempotency_key, authorization, paymentSignature: paymentSignatureOf(meta), payload })
          .pipe(Effect.match({ onFailure: errorResult, onSuccess: successResult }))
      })

    const serverFor = (runtime: Runtime.Runtime<never>, authorization: Option.Option<string>) => {
      const server = new Server({ name: "morsel", version: SERVICE_VERSION }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS })
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [tool] }))
      server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
        if (request.params.name !== TOOL_NAME) throw new McpError(ErrorCode.InvalidParams, `unknown tool: ${request.params.name}`)
        // Its own fiber, not the HTTP request's: a caller who hangs up does not cancel a paid analysis (as on REST).
        const exit = await Runtime.runPromiseExit(runtime)(analyzeFood(authorization, request.params.arguments, request.params._meta))
        if (Exit.isSuccess(exit)) return exit.value
        await Runtime.runPromise(runtime)(Effect.logError("analyze_food failed unexpectedly", Cause.pretty(exit.cause)))
        throw new McpError(ErrorCode.InternalError, "internal error; retry the same call with the same idempotency_key")
      })
      return server
    }

    const handle = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        if (request.method !== "POST") return methodNotAllowed
        const runtime = yield* Effect.runtime<never>()
        const server = serverFor(runtime, Option.fromNullable(request.headers["authorization"]))
        // JSON answers, no session: every POST stands alone, so any instance can serve it.
        const transport = new WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
          maxRequestBodySize: MAX_BODY_BYTES
        })
        return yield* Effect.acquireUseRelease(
          Effect.promise(() => server.connect(transport)),
          () =>
            Effect.flatMap(
              HttpServerRequest.toWeb(request),
              (web) => Effect.promise(() => transport.handleRequest(web))
            ).pipe(Effect.map(HttpServerResponse.fromWeb)),
          () => Effect.promise(() => server.close())
        )
      })

    yield* router.add("*", MCP_PATH, handle)
  })
)
