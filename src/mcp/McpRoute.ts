/** The tool interface at /mcp: MCP 2026-07-28 (stateless, `server/discover`) and 2025-era clients, calling the same analysis as REST. */
import { Headers, HttpLayerRouter, HttpServerRequest, HttpServerResponse, HttpTraceContext } from "@effect/platform"
import type { CallToolResult, Server } from "@modelcontextprotocol/server"
import { Cause, Effect, Either, Exit, Option, Runtime } from "effect"
import { type AnalyzeError, AnalyzeRequests } from "../analysis/AnalyzeRequests.ts"
import { credentialOf } from "../analysis/Funding.ts"
import { makeClientAddress } from "../request/clientAddress.ts"
import { AppConfig, type Settings } from "../config.ts"
import { Processor } from "../credits/Processor.ts"
import { MAX_BODY_BYTES, MAX_JSON_CONTAINERS } from "../domain/bodies.ts"
import { capMessage } from "../domain/errors.ts"
import { parseBody, parseJson, RepeatedKey } from "../request/body.ts"
import { isJson, jsonShapeRefusal, readWhole } from "../request/read.ts"
import { callFoodTool, FOOD_TOOLS, foodToolDefinitions } from "../foods/faces/mcp.ts"
import { SERVICE_VERSION } from "../version.ts"
import { APP_MIME_TYPE, APP_URI, appHtml } from "./app.ts"
import { downloadGate, hasImageFile, withDownloadedImage, withPhotoNotFetched } from "./files/imageFile.ts"
import { decodeInput, errorResult, ICON_SVG, ICONS, paymentOf, successResult, TOOL_NAME, toolChallenge, toolDefinition } from "./tool.ts"

export const MCP_PATH = "/mcp"

/** The icon as a file, for listings that take only an https address (the MCP registry's server.json). */
export const ICON_PATH = "/icon.svg"

/** What an agent needs before its first call: the price, the two ways to pay, what is free and how to retry. */
const instructions = (settings: Settings, cardCredits: boolean) =>
  [
    `morsel estimates the calories, protein, carbohydrate and fat of one food photo with the ${TOOL_NAME} tool. Listing tools is free.`,
    "search_foods (find foods) and food_nutrition (nutrition of foods named by text or fdc_id, in grams or household portions, e.g. to correct an analysis) are free: no key, no payment, no model call; limited per client address and per key.",
    "Each successful call costs one prepaid credit or 0.01 USDC; failed calls (invalid input, no food, analysis failure or timeout, a limit) cost nothing.",
    !cardCredits
      ? "Prepaid card credits are not sold on this server."
      : Option.isSome(settings.stripe)
        ? `Credits: 500 for USD 5.00, bought by card at ${settings.publicBaseUrl}/v1/credits/checkout; send the key as the connection's Authorization: Bearer header.`
        : "Credits: send a prepaid credit key as the connection's Authorization: Bearer header.",
    Option.isSome(settings.x402.payTo)
      ? 'Per call with x402 (version 2, scheme exact, USDC on Base eip155:8453, amount 10000): a call without payment returns the price challenge (isError, structuredContent = PaymentRequired); sign it and repeat the call with the PaymentPayload object in params._meta["x402/payment"]. The receipt comes back in _meta["x402/payment-response"].'
      : "Per-call x402 payments are not enabled on this server.",
    "Reuse the same idempotency_key to retry or to recover a result for 24 hours; after payment_pending repeat the identical call after 60 seconds and never sign a new payment."
  ].join(" ")

type Sdk = typeof import("@modelcontextprotocol/server")

/** The MCP SDK, loaded with the first request to /mcp (the module is cached): a server no agent calls does not hold it (about 5 MiB). */
const loadSdk = (): Promise<Sdk> => import("@modelcontextprotocol/server")

/** The trace a caller started, from the W3C trace context in the call's `_meta`. */
const parentSpanOf = (sdk: Sdk, meta: Readonly<Record<string, unknown>> | undefined) => {
  const traceparent = meta?.[sdk.TRACEPARENT_META_KEY]
  if (typeof traceparent !== "string") return Option.none()
  const tracestate = meta?.[sdk.TRACESTATE_META_KEY]
  return HttpTraceContext.fromHeaders(Headers.fromInput({ traceparent, ...(typeof tracestate === "string" ? { tracestate } : {}) }))
}

/** Stateless servers keep no stream open: GET (server-sent events) and DELETE (sessions) are not offered. */
const methodNotAllowed = HttpServerResponse.unsafeJson(
  { jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: this MCP server is stateless; use POST" }, id: null },
  { status: 405, headers: { allow: "POST" } }
)

/** A JSON-RPC error as the SDK answers one about the HTTP request itself (no message id is known). */
const rpcError = (status: number, code: number, message: string) =>
  HttpServerResponse.unsafeJson({ jsonrpc: "2.0", error: { code, message }, id: null }, { status })

/**
 * A POST's JSON-RPC message, read and parsed here rather than by the SDK: within the same bound as a REST body, and
 * refused when it gives a key twice (JSON.parse, which the SDK uses, would keep the last; a proxy may keep the first).
 * Its answers otherwise are the SDK's own.
 */
const readMessage = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.map(readWhole(request), (body): Either.Either<unknown, HttpServerResponse.HttpServerResponse> => {
    if (body === "too_large") {
      const message = `Payload Too Large: Request body must not exceed ${MAX_BODY_BYTES} bytes`
      return Either.left(rpcError(413, -32000, message).pipe(HttpServerResponse.setHeader("connection", "close")))
    }
    if (body === "cut") return Either.left(rpcError(400, -32700, "Parse error: the request body could not be read"))
    // Counted before the parse: JSON.parse of a body of 890,000 empty objects holds the server for half a second.
    if (jsonShapeRefusal(typeof body === "string" ? body : body.toString("latin1"), Number.POSITIVE_INFINITY, MAX_JSON_CONTAINERS) === "too_many") {
      return Either.left(rpcError(400, -32600, `Invalid Request: the message holds more than ${MAX_JSON_CONTAINERS} objects and arrays`))
    }
    try {
      return Either.right(typeof body === "string" ? parseJson(body) : parseBody(body))
    } catch (error) {
      return Either.left(
        error instanceof RepeatedKey
          ? rpcError(400, -32700, capMessage(`Parse error: the request body repeats the key ${JSON.stringify(error.key)}; send each key once`))
          : rpcError(400, -32700, "Parse error: Invalid JSON")
      )
    }
  })

/**
 * Every revision this server speaks, newest first: 2026-07-28 (stateless, `server/discover`) and the 2025 ones with
 * `initialize`. Older ones are not offered: their clients cannot read a tool's structured content, where the price is.
 */
export const PROTOCOL_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18"]

/** `server/discover` names the 2025 revisions too (the SDK lists only 2026's), so a client learns all it may speak here. */
const withEveryRevision = async (answer: Response): Promise<Response> => {
  if (!answer.ok || !(answer.headers.get("content-type") ?? "").startsWith("application/json")) return answer
  const body = (await answer.json()) as { readonly result?: Record<string, unknown> }
  const result = body.result === undefined ? undefined : { ...body.result, supportedVersions: PROTOCOL_VERSIONS }
  const headers = new globalThis.Headers(answer.headers)
  headers.delete("content-length")
  return new Response(JSON.stringify(result === undefined ? body : { ...body, result }), { status: answer.status, headers })
}

const isDiscover = (message: unknown) =>
  typeof message === "object" && message !== null && "method" in message && message.method === "server/discover"

/** The tool list and the server card may be cached for an hour by anyone: they name no caller. */
const ONE_HOUR_PUBLIC = { ttlMs: 3_600_000, cacheScope: "public" } as const

export const McpRoute = HttpLayerRouter.use((router) =>
  Effect.gen(function* () {
    const requests = yield* AnalyzeRequests
    const settings = yield* AppConfig
    const tool = toolDefinition(settings.publicBaseUrl)
    const clientAddress = makeClientAddress(settings.trustedProxies)
    const forTool = toolChallenge(settings.publicBaseUrl + MCP_PATH)
    const failed = (failure: AnalyzeError) => errorResult(failure, forTool)
    const fetching = downloadGate()
    const cards = yield* Effect.serviceOption(Processor)
    const serverInstructions = instructions(settings, Option.exists(cards, (processor) => processor.enabled))
    const foodContext = yield* Effect.context<Effect.Effect.Context<ReturnType<typeof callFoodTool>>>()
    const card = { uri: APP_URI, name: "analyze_food card", title: "Food photo card", mimeType: APP_MIME_TYPE }
    // Made on the first read (hosts keep it for an hour): a server no App host has asked for it does not hold it.
    let cardHtml: string | undefined
    const cardContents = () => {
      cardHtml ??= appHtml()
      return [{ uri: APP_URI, mimeType: APP_MIME_TYPE, text: cardHtml }]
    }

    /** One tool call through the shared pipeline; every typed failure becomes a tool error, never a protocol error. */
    const analyzeFood = (
      sdk: Sdk,
      from: { readonly authorization: Option.Option<string>; readonly client: string },
      args: unknown,
      meta: Readonly<Record<string, unknown>> | undefined
    ) =>
      Effect.gen(function* () {
        const credential = credentialOf(from.authorization, paymentOf(meta), from.client)
        // A file is fetched only for a caller who could pay (a key with a credit left, a payment the chain would take,
        // a retry of its own request), once its other arguments hold: nobody else makes this server download anything.
        if (hasImageFile(args)) {
          const others = yield* Effect.either(Effect.flatMap(withPhotoNotFetched(args), (stand) => decodeInput(stand)))
          if (Either.isLeft(others)) return failed(others.left)
          const allowed = yield* Effect.either(requests.mayFetch(credential, others.right.idempotency_key))
          if (Either.isLeft(allowed)) return failed(allowed.left)
        }
        // Only a download takes one of the instance's places: a photo in base64 never waits for one.
        const downloaded = yield* Effect.either(hasImageFile(args) ? fetching(withDownloadedImage(args, settings.mcpFiles)) : Effect.succeed(args))
        if (Either.isLeft(downloaded)) return failed(downloaded.left)
        const input = decodeInput(downloaded.right)
        if (Either.isLeft(input)) return failed(input.left)
        const { idempotency_key, ...payload } = input.right
        return yield* requests
          .analyze({ idempotencyKey: idempotency_key, credential, payload })
          .pipe(Effect.match({ onFailure: failed, onSuccess: successResult }))
      }).pipe(
        Effect.withSpan(`mcp tools/call ${TOOL_NAME}`),
        (traced) => Option.match(parentSpanOf(sdk, meta), { onNone: () => traced, onSome: (parent) => Effect.withParentSpan(traced, parent) })
      )

    /** A fresh server per HTTP request (both eras are stateless), holding the request's Authorization header and client address. */
    const serverFor = (sdk: Sdk, runtime: Runtime.Runtime<never>, from: { readonly authorization: Option.Option<string>; readonly client: string }) => {
      const { ProtocolError, ProtocolErrorCode } = sdk
      const server = new sdk.Server(
        { name: "morsel", title: "morsel food-photo nutrition", version: SERVICE_VERSION, icons: ICONS, websiteUrl: settings.publicBaseUrl },
        {
          capabilities: { tools: {}, prompts: {}, resources: {} },
          supportedProtocolVersions: [...PROTOCOL_VERSIONS],
          instructions: serverInstructions,
          cacheHints: {
            "tools/list": ONE_HOUR_PUBLIC,
            "server/discover": ONE_HOUR_PUBLIC,
            "prompts/list": ONE_HOUR_PUBLIC,
            "resources/list": ONE_HOUR_PUBLIC,
            "resources/templates/list": ONE_HOUR_PUBLIC,
            "resources/read": ONE_HOUR_PUBLIC
          }
        }
      )
      server.setRequestHandler("tools/list", () => ({ tools: [tool, ...foodToolDefinitions] }))
      // No prompts and no resource templates (the lists answer empty); one resource, the App of analyze_food.
      server.setRequestHandler("prompts/list", () => ({ prompts: [] }))
      server.setRequestHandler("resources/templates/list", () => ({ resourceTemplates: [] }))
      server.setRequestHandler("resources/list", () => ({ resources: [card] }))
      server.setRequestHandler("resources/read", (request) => {
        if (request.params.uri !== APP_URI) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown resource: ${request.params.uri}`)
        return { contents: cardContents() }
      })
      server.setRequestHandler("tools/call", async (request): Promise<CallToolResult> => {
        // The free food tools: read-only, their own budget per client address and key (shared with REST).
        if (FOOD_TOOLS.includes(request.params.name)) {
          const call = callFoodTool(request.params.name, request.params.arguments, from.client, Option.getOrUndefined(from.authorization))
          return Runtime.runPromise(runtime)(Effect.provide(call, foodContext))
        }
        if (request.params.name !== TOOL_NAME) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown tool: ${request.params.name}`)
        // Its own fiber, not the HTTP request's: a caller who hangs up does not cancel a paid analysis (as on REST).
        const exit = await Runtime.runPromiseExit(runtime)(analyzeFood(sdk, from, request.params.arguments, request.params._meta))
        if (Exit.isSuccess(exit)) return server.projectCallToolResult(exit.value, tool.outputSchema)
        await Runtime.runPromise(runtime)(Effect.logError("analyze_food failed unexpectedly", Cause.pretty(exit.cause)))
        throw new ProtocolError(ProtocolErrorCode.InternalError, "internal error; retry the same call with the same idempotency_key")
      })
      return server
    }

    /** A 2025-era request (initialize, then each call on its own): answered as JSON, without a session. */
    const legacy = (sdk: Sdk, server: Server, web: Request, parsedBody: unknown) => {
      const transport = new sdk.WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
        maxRequestBodySize: MAX_BODY_BYTES
      })
      return Effect.acquireUseRelease(
        Effect.promise(() => server.connect(transport)),
        () => Effect.promise(() => transport.handleRequest(web, parsedBody === undefined ? undefined : { parsedBody })),
        () => Effect.promise(() => server.close())
      )
    }

    const handle = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        // DNS rebinding is refused before this route: a browser's Origin must be trusted (TRUSTED_ORIGINS, the
        // public address, or this very loopback address), which a rebound name is not.
        if (request.method !== "POST") return methodNotAllowed
        // A JSON body is read here (any other type is refused before this route, or by the SDK when there is none).
        const message = isJson(request.headers["content-type"]) ? yield* readMessage(request) : Either.right(undefined)
        if (Either.isLeft(message)) return message.left
        const parsedBody = message.right
        const sdk = yield* Effect.promise(loadSdk)
        const web =
          parsedBody === undefined
            ? yield* HttpServerRequest.toWeb(request)
            : new Request(Option.getOrElse(HttpServerRequest.toURL(request), () => new URL(settings.publicBaseUrl + MCP_PATH)), {
                method: request.method,
                headers: request.headers
              })
        const runtime = yield* Effect.runtime<never>()
        const server = () => serverFor(sdk, runtime, { authorization: Option.fromNullable(request.headers["authorization"]), client: clientAddress(request) })
        const isLegacy = yield* Effect.promise(() => sdk.isLegacyRequest(web, parsedBody, { maxRequestBodySize: MAX_BODY_BYTES }))
        if (isLegacy) return HttpServerResponse.fromWeb(yield* legacy(sdk, server(), web, parsedBody))
        // 2026-07-28: every request carries its protocol version and client in `_meta`. The tool sends nothing before
        // its result, so answers are plain JSON, never a stream.
        const modern = sdk.createMcpHandler(server, { legacy: "reject", maxRequestBodySize: MAX_BODY_BYTES, keepAliveMs: 0 })
        const answer = yield* Effect.promise(() => modern.fetch(web, parsedBody === undefined ? undefined : { parsedBody }))
        return HttpServerResponse.fromWeb(isDiscover(parsedBody) ? yield* Effect.promise(() => withEveryRevision(answer)) : answer)
      })

    yield* router.add("*", MCP_PATH, handle)
    yield* router.add(
      "GET",
      ICON_PATH,
      Effect.succeed(HttpServerResponse.text(ICON_SVG, { contentType: "image/svg+xml", headers: { "cache-control": "public, max-age=86400" } }))
    )
  })
)
