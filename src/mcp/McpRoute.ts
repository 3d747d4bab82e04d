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
import { type AnalyzeError, AnalyzeRequests } from "../analysis/AnalyzeRequests.ts"
import { credentialOf } from "../analysis/Funding.ts"
import { AppConfig, type Settings } from "../config.ts"
import { SERVICE_VERSION } from "../http/health.ts"
import { MAX_BODY_BYTES } from "../http/transport.ts"
import { decodeInput, errorResult, paymentOf, successResult, TOOL_NAME, toolChallenge, toolDefinition } from "./tool.ts"

export const MCP_PATH = "/mcp"

/** What an agent needs before its first call: the price, the two ways to pay, what is free and how to retry. */
const instructions = (settings: Settings) =>
  [
    `morsel estimates the calories, protein, carbohydrate and fat of one food photo with the ${TOOL_NAME} tool. Listing tools is free.`,
    "Each successful call costs one prepaid credit or 0.01 USDC; failed calls (invalid input, no food, analysis failure or timeout, a limit) cost nothing.",
    Option.isSome(settings.stripe)
      ? `Credits: 500 for USD 5.00, bought by card at ${settings.publicBaseUrl}/v1/credits/checkout; send the key as the connection's Authorization: Bearer header.`
      : "Credits: send a prepaid credit key as the connection's Authorization: Bearer header.",
    Option.isSome(settings.x402.payTo)
      ? 'Per call with x402 (version 2, scheme exact, USDC on Base eip155:8453, amount 10000): a call without payment returns the price challenge (isError, structuredContent = PaymentRequired); sign it and repeat the call with the PaymentPayload object in params._meta["x402/payment"]. The receipt comes back in _meta["x402/payment-response"].'
      : "Per-call x402 payments are not enabled on this server.",
    "Reuse the same idempotency_key to retry or to recover a result for 24 hours; after payment_pending repeat the identical call after 60 seconds and never sign a new payment."
  ].join(" ")

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
    const forTool = toolChallenge(settings.publicBaseUrl + MCP_PATH)
    const failed = (failure: AnalyzeError) => errorResult(failure, forTool)
    const serverInstructions = instructions(settings)

    /** One tool call through the shared pipeline; every typed failure becomes a tool error, never a protocol error. */
    const analyzeFood = (authorization: Option.Option<string>, args: unknown, meta: Readonly<Record<string, unknown>> | undefined) =>
      Effect.gen(function* () {
        const input = decodeInput(args)
        if (Either.isLeft(input)) return failed(input.left)
        const { idempotency_key, ...payload } = input.right
        return yield* requests
          .analyze({ idempotencyKey: idempotency_key, credential: credentialOf(authorization, paymentOf(meta)), payload })
          .pipe(Effect.match({ onFailure: failed, onSuccess: successResult }))
      })

    const serverFor = (runtime: Runtime.Runtime<never>, authorization: Option.Option<string>) => {
      const server = new Server({ name: "morsel", version: SERVICE_VERSION }, { capabilities: { tools: {} }, instructions: serverInstructions })
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
