/** Transport rules of every request: trusted browser origins and CORS, JSON-only bodies, body size and depth, error bodies. */
import { IncomingMessage } from "node:http"
import { HttpLayerRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { SqlError } from "@effect/sql"
import { Cause, Effect, Either, Exit, Option, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { storageUnavailable } from "../db/storage.ts"
import { MAX_BODY_BYTES, MAX_JSON_CONTAINERS, MAX_JSON_DEPTH, tooDeep, tooMany } from "../domain/bodies.ts"
import { SHRINK_PHOTO } from "../domain/image.ts"
import {
  capMessage,
  Forbidden,
  InvalidRequest,
  PayloadTooLarge,
  schemaRejection,
  UnsupportedMediaType
} from "../domain/errors.ts"
import { liftImage, parseJson, parseLifted, RepeatedKey, readBody, wholeText } from "../request/body.ts"
import { isJson, jsonShapeRefusal, readWhole } from "../request/read.ts"

export const EXPOSED_HEADERS = ["PAYMENT-REQUIRED", "PAYMENT-RESPONSE", "Retry-After", "Mcp-Session-Id", "Morsel-Sandbox"]
const ALLOWED_HEADERS = [
  "Content-Type",
  "Authorization",
  "Idempotency-Key",
  "PAYMENT-SIGNATURE",
  "Mcp-Session-Id",
  "Mcp-Protocol-Version",
  "Mcp-Method",
  "Mcp-Name",
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

/**
 * Whether a URL reaches the tool interface, whose route reads its body itself. Asked of a router made with the
 * service router's own settings, so every spelling the router sends there (`/mcp/`, `/mcp//`, `/MCP`, `/mcp?x`)
 * is left unread here too: a body read twice would leave that route waiting for bytes that never come.
 */
const toolInterfaceMatcher = (config: Partial<HttpLayerRouter.FindMyWay.RouterConfig>) => {
  const router = HttpLayerRouter.FindMyWay.make<true>(config)
  router.all("/mcp", true)
  return (url: string) => router.find("POST", url) !== undefined
}

/** The sandbox's own pages post browser forms to the service. */
const isSandboxPage = (url: string) => url.startsWith("/sandbox/")

const bodyTooLarge = new PayloadTooLarge({
  error: {
    code: "request_too_large",
    message: `request body exceeds ${MAX_BODY_BYTES} bytes: ${SHRINK_PHOTO}`
  }
})

const bodyCut = new InvalidRequest({ error: { code: "invalid_request", message: "the request body ended before it was complete" } })

/**
 * Reads and drops what is left of a body no one read (a refusal given before reading it, a route that ignores it),
 * up to DRAIN_BYTES. An answer sent while the body is still arriving, on a connection that then closes (the
 * client asked for that, or the server is stopping), is lost to a reset: the client sees ECONNRESET, not the answer.
 */
const readRest = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<void> => {
  const source = request.source
  const hasBody = Number(request.headers["content-length"] ?? "0") > 0 || request.headers["transfer-encoding"] !== undefined
  return source instanceof IncomingMessage && hasBody && !source.readableEnded ? Effect.promise(() => readBody(source, 0)) : Effect.void
}

/**
 * The same request, its body already read: routes decode it from here. A body with a long image is parsed with
 * the image lifted out (`parseLifted`); its whole text is made only for a route that reads text.
 */
const withBody = (request: HttpServerRequest.HttpServerRequest, parse: () => unknown, whole: () => string): HttpServerRequest.HttpServerRequest =>
  Object.create(request, {
    text: { get: () => Effect.sync(whole) },
    json: {
      get: () => Effect.try({ try: parse, catch: (cause) => new HttpServerError.RequestError({ request, reason: "Decode", cause }) })
    }
  })

/**
 * Reads and checks a body before any route does: the request the route then gets (its text read once, here), or
 * the answer that refuses it.
 */
const guardBody = (
  request: HttpServerRequest.HttpServerRequest,
  streamsOwnBody: (url: string) => boolean
): Effect.Effect<Either.Either<HttpServerResponse.HttpServerResponse, HttpServerRequest.HttpServerRequest>> =>
  Effect.gen(function* () {
    const declared = Number(request.headers["content-length"] ?? "0")
    const empty = declared === 0 && request.headers["transfer-encoding"] === undefined
    // A POST without a body and without a type (`fetch(url, { method: "POST" })`) has nothing to check; nor has the
    // sandbox checkout's Pay button, a browser form. Any other declared type is refused, body or not.
    if (empty && (request.headers["content-type"] === undefined || isSandboxPage(request.url))) return Either.left(request)
    if (!isJson(request.headers["content-type"])) {
      return Either.right(
        errorResponse(
          new UnsupportedMediaType({
            error: { code: "unsupported_media_type", message: "request bodies must be sent as Content-Type: application/json" }
          })
        )
      )
    }
    if (empty || streamsOwnBody(request.url)) return Either.left(request)
    const body = yield* readWhole(request)
    // Read to its end (within DRAIN_BYTES), so that the client reads this answer; then the connection closes.
    if (body === "too_large") return Either.right(errorResponse(bodyTooLarge).pipe(HttpServerResponse.setHeader("connection", "close")))
    if (body === "cut") return Either.right(errorResponse(bodyCut))
    const lifted = typeof body === "string" ? undefined : liftImage(body)
    const text = lifted?.text ?? body.toString()
    const shape = jsonShapeRefusal(text, MAX_JSON_DEPTH, MAX_JSON_CONTAINERS)
    if (shape === "too_deep") return Either.right(errorResponse(tooDeep("request body is")))
    if (shape === "too_many") return Either.right(errorResponse(tooMany("request body holds")))
    return Either.left(
      typeof body === "string" || lifted === undefined
        ? withBody(request, () => parseJson(text), () => text)
        : withBody(request, () => parseLifted(lifted), () => wholeText(lifted))
    )
  })

/** The 400 for a body the routes could not read: not JSON, or JSON that gives a key twice. */
const unreadableBody = (cause: unknown) =>
  new InvalidRequest({
    error: {
      code: "invalid_request",
      message:
        cause instanceof RepeatedKey
          ? capMessage(`request body repeats the key ${JSON.stringify(cause.key)}; send each key once`)
          : "request body is not valid JSON"
    }
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

/** Gives schema rejections the same `error.code` body as every other error, quoting at most a little of the input. */
const normaliseDecodeError = (response: HttpServerResponse.HttpServerResponse) => {
  if (response.status !== 400 || response.body._tag !== "Uint8Array") return response
  return Option.match(decodeErrorBody(new TextDecoder().decode(response.body.body)), {
    onNone: () => response,
    onSome: (decoded) => errorResponse(schemaRejection(decoded.issues, decoded.message)).pipe(HttpServerResponse.setHeaders(response.headers))
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

/** The answer when nothing else gave one; the cause goes to the log, never to the caller. */
const internalError = HttpServerResponse.unsafeJson(
  { _tag: "InternalServerError", error: { code: "internal_error", message: "the service failed unexpectedly; retry the same request later" } },
  { status: 500 }
)

/** The database went away under a request (a rollback on a cut connection dies): a passing outage, not a crash. */
const storageGone = storageUnavailable()
const storageGoneResponse = HttpServerResponse.unsafeJson(
  { _tag: storageGone._tag, error: storageGone.error },
  { status: 503, headers: { "retry-after": String(storageGone.retryAfterSeconds ?? 5) } }
)

/** A failure that would become an empty 500 becomes a logged JSON 500; every other failure keeps its own answer. */
const lastResort = (cause: Cause.Cause<unknown>) =>
  Cause.isInterruptedOnly(cause)
    ? Effect.failCause(cause)
    : Cause.squash(cause) instanceof SqlError.SqlError
    ? Effect.as(Effect.logError("storage failure", cause), storageGoneResponse)
    : Effect.flatMap(HttpServerError.causeResponse(cause), ([response]) =>
        response.status === 500 && response.body._tag === "Empty"
          ? Effect.as(Effect.logError("request failed unexpectedly", cause), internalError)
          : Effect.failCause(cause)
      )

const corsHeaders = (origin: string) => ({
  "access-control-allow-origin": origin,
  "access-control-expose-headers": EXPOSED_HEADERS.join(", "),
  vary: "Origin"
})

export const TransportGuard = HttpLayerRouter.middleware(
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const trusted = new Set([...settings.trustedOrigins, new URL(settings.publicBaseUrl).origin])
    const streamsOwnBody = toolInterfaceMatcher(yield* HttpLayerRouter.RouterConfig)
    const guard = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        // Whatever the answer, the body is read to its end first (within DRAIN_BYTES), so that the client reads it.
        return yield* Effect.onExit(guarded(app, request), (exit) => (Exit.isInterrupted(exit) ? Effect.void : readRest(request)))
      })

    const guarded = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>, request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const origin = request.headers["origin"]
        if (origin !== undefined && !trusted.has(origin) && !isOwnLoopbackOrigin(origin, request.headers["host"])) {
          return errorResponse(
            new Forbidden({ error: { code: "untrusted_origin", message: capMessage(`browser origin ${origin} is not trusted by this service`) } })
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
        const guarded = request.method === "POST" ? yield* guardBody(request, streamsOwnBody) : Either.left(request)
        if (Either.isRight(guarded)) return guarded.right.pipe(HttpServerResponse.setHeaders(cors))
        const routed = guarded.left === request ? app : Effect.provideService(app, HttpServerRequest.HttpServerRequest, guarded.left)
        const response = yield* routed.pipe(
          Effect.catchAllCause((cause) => {
            // A body that is not JSON surfaces as a request error (even as a defect), not as a schema error.
            const error = Cause.squash(cause)
            return HttpServerError.isServerError(error) && error._tag === "RequestError" && error.reason === "Decode"
              ? Effect.succeed(errorResponse(unreadableBody(error.cause)))
              : lastResort(cause)
          })
        )
        // A route that answered an empty 500 itself is given the same body as any other defect.
        const answered = response.status === 500 && response.body._tag === "Empty" ? internalError : normaliseDecodeError(response)
        return answered.pipe(HttpServerResponse.setHeaders(cors))
      })
    return guard
  }),
  { global: true }
)
