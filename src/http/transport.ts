/** Transport rules of every request: trusted browser origins and CORS, JSON-only bodies, body size, error bodies. */
import { HttpIncomingMessage, HttpLayerRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Option, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { Forbidden, InvalidRequest, PayloadTooLarge, UnsupportedMediaType } from "../domain/errors.ts"

/** The largest valid request is a 2,666,668-character image plus a few short fields. */
export const MAX_BODY_BYTES = 2_700_000

export const EXPOSED_HEADERS = ["PAYMENT-REQUIRED", "PAYMENT-RESPONSE", "Retry-After", "Mcp-Session-Id", "Morsel-Sandbox"]
const ALLOWED_HEADERS = [
  "Content-Type",
  "Authorization",
  "Idempotency-Key",
  "PAYMENT-SIGNATURE",
  "Mcp-Session-Id",
  "Mcp-Protocol-Version",
  "Last-Event-ID",
  "Sandbox-Scenario"
]

type TransportError = Forbidden | PayloadTooLarge | UnsupportedMediaType | InvalidRequest

const statusOf: Record<TransportError["_tag"], number> = {
  Forbidden: 403,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415,
  InvalidRequest: 400
}

/** The same body the HttpApi error encoding produces, for answers given before a route runs. */
export const errorResponse = (error: TransportError) =>
  HttpServerResponse.unsafeJson({ _tag: error._tag, error: error.error }, { status: statusOf[error._tag] })

const isJson = (contentType: string | undefined) =>
  contentType !== undefined && contentType.split(";")[0]!.trim().toLowerCase() === "application/json"

/** Paths whose bodies are read by a transport of their own (the MCP SDK streams them). */
const streamsOwnBody = (url: string) => url === "/mcp" || url.startsWith("/mcp?")

const bodyTooLarge = new PayloadTooLarge({
  error: { code: "request_too_large", message: `request body exceeds ${MAX_BODY_BYTES} bytes` }
})

/** Rejects a bad body before any route reads it; the text read here is cached for the route. */
const guardBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    // A POST without a body (the sandbox checkout's Pay button, `fetch(url, { method: "POST" })`) has nothing to check.
    const declared = Number(request.headers["content-length"] ?? "0")
    if (declared === 0 && request.headers["transfer-encoding"] === undefined) return Option.none()
    if (!isJson(request.headers["content-type"])) {
      return Option.some(
        errorResponse(
          new UnsupportedMediaType({
            error: { code: "unsupported_media_type", message: "request bodies must be sent as Content-Type: application/json" }
          })
        )
      )
    }
    if (declared > MAX_BODY_BYTES) return Option.some(errorResponse(bodyTooLarge))
    if (streamsOwnBody(request.url)) return Option.none()
    const read = yield* request.text.pipe(HttpIncomingMessage.withMaxBodySize(Option.some(MAX_BODY_BYTES)), Effect.either)
    return read._tag === "Left" ? Option.some(errorResponse(bodyTooLarge)) : Option.none()
  })

const decodeErrorBody = Schema.decodeUnknownOption(
  Schema.parseJson(
    Schema.Struct({
      _tag: Schema.Literal("HttpApiDecodeError"),
      message: Schema.String,
      issues: Schema.Array(Schema.Struct({ path: Schema.Array(Schema.Union(Schema.String, Schema.Number)), message: Schema.String }))
    })
  )
)

/** Gives schema rejections the same `error.code` body as every other error. */
const normaliseDecodeError = (response: HttpServerResponse.HttpServerResponse) => {
  if (response.status !== 400 || response.body._tag !== "Uint8Array") return response
  return Option.match(decodeErrorBody(new TextDecoder().decode(response.body.body)), {
    onNone: () => response,
    onSome: (decoded) => {
      const first = decoded.issues[0]
      const where = first && first.path.length > 0 ? `${first.path.join(".")}: ` : ""
      return errorResponse(
        new InvalidRequest({
          error: {
            code: "invalid_request",
            message: first ? `${where}${first.message}` : decoded.message,
            issues: decoded.issues
          }
        })
      ).pipe(HttpServerResponse.setHeaders(response.headers))
    }
  })
}

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]"])

/**
 * A page of this service opened on a loopback name (localhost or 127.0.0.1, the port it was reached on) is the
 * service itself. The Host must be a loopback name too, so a rebound DNS name pointing at 127.0.0.1 is not.
 */
const isOwnLoopbackOrigin = (origin: string, host: string | undefined) => {
  if (!URL.canParse(origin)) return false
  const url = new URL(origin)
  return url.protocol === "http:" && url.host === host && LOOPBACK_NAMES.has(url.hostname)
}

const corsHeaders = (origin: string) => ({
  "access-control-allow-origin": origin,
  "access-control-expose-headers": EXPOSED_HEADERS.join(", "),
  vary: "Origin"
})

export const TransportGuard = HttpLayerRouter.middleware(
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const trusted = new Set([...settings.trustedOrigins, new URL(settings.publicBaseUrl).origin])
    return (app) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const origin = request.headers["origin"]
        if (origin !== undefined && !trusted.has(origin) && !isOwnLoopbackOrigin(origin, request.headers["host"])) {
          return errorResponse(
            new Forbidden({ error: { code: "untrusted_origin", message: `browser origin ${origin} is not trusted by this service` } })
          )
        }
        const cors = origin === undefined ? {} : corsHeaders(origin)
        if (request.method === "OPTIONS" && origin !== undefined) {
          return HttpServerResponse.empty({ status: 204 }).pipe(
            HttpServerResponse.setHeaders({
              ...cors,
              "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
              "access-control-allow-headers": ALLOWED_HEADERS.join(", "),
              "access-control-max-age": "600"
            })
          )
        }
        if (request.method === "POST") {
          const rejected = yield* guardBody(request)
          if (Option.isSome(rejected)) return rejected.value.pipe(HttpServerResponse.setHeaders(cors))
        }
        const response = yield* app.pipe(
          Effect.catchAllCause((cause) => {
            // A body that is not JSON surfaces as a request error (even as a defect), not as a schema error.
            const error = Cause.squash(cause)
            return HttpServerError.isServerError(error) && error._tag === "RequestError" && error.reason === "Decode"
              ? Effect.succeed(errorResponse(new InvalidRequest({ error: { code: "invalid_request", message: "request body is not valid JSON" } })))
              : Effect.failCause(cause)
          })
        )
        return normaliseDecodeError(response).pipe(HttpServerResponse.setHeaders(cors))
      })
  }),
  { global: true }
)
