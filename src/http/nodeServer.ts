/**
 * The Node HTTP server under the service: it answers 503 with Retry-After whenever the application is not attached,
 * and lets a fast lane answer the hottest requests before the application sees them.
 */
import { IncomingMessage, Server, ServerResponse, STATUS_CODES } from "node:http"
import { Socket } from "node:net"
import type { Duplex } from "node:stream"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer } from "effect"
import { DRAIN_BYTES, readBody } from "../request/body.ts"

const NOT_READY = JSON.stringify({
  _tag: "ServiceUnavailable",
  error: { code: "starting", message: "the service is starting or stopping; retry in a moment" }
})

/** How long a connection refused before its request was read stays open to take what the client still sends. */
export const REFUSED_DRAIN_MS = 10_000

/** The answer to a request Node's parser refused: too many header bytes, too slow, or not HTTP. */
const refusalOf = (error: NodeJS.ErrnoException) => {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW":
      return { status: 431, tag: "RequestHeadersTooLarge", code: "headers_too_large", message: "the request's headers exceed 16 KiB; send fewer or shorter headers" }
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { status: 408, tag: "RequestTimeout", code: "request_timeout", message: "the request did not arrive in time; send it again" }
    default:
      return { status: 400, tag: "InvalidRequest", code: "invalid_request", message: "the request is not valid HTTP/1.1" }
  }
}

/** Whether an answer has begun on the socket (a response of an earlier request on it): nothing may be written in between. */
const answering = (socket: Duplex) => (socket as Duplex & { _httpMessage?: { readonly headersSent: boolean } | null })._httpMessage?.headersSent === true

/**
 * Node's own answer to a request its parser refuses is written and the connection destroyed at once: with the
 * body still arriving, the client sees a reset, not the answer. Here the answer is a JSON error like any other,
 * and the connection is closed by us only once the client stops sending (DRAIN_BYTES or REFUSED_DRAIN_MS at most):
 * the parser, failed, reads what comes and refuses each piece again, which is ignored.
 */
const refuseConnection = (refused: WeakSet<Duplex>) => (error: NodeJS.ErrnoException, socket: Duplex) => {
  if (refused.has(socket)) {
    if (socket instanceof Socket && socket.bytesRead > DRAIN_BYTES) socket.destroy()
    return
  }
  refused.add(socket)
  if (error.code === "ECONNRESET" || !socket.writable || answering(socket)) return void socket.destroy()
  const { code, message, status, tag } = refusalOf(error)
  const body = JSON.stringify({ _tag: tag, error: { code, message } })
  const head = [`HTTP/1.1 ${status} ${STATUS_CODES[status]}`, "content-type: application/json", `content-length: ${Buffer.byteLength(body)}`, "connection: close"]
  socket.end(`${head.join("\r\n")}\r\n\r\n${body}`)
  const timer = setTimeout(() => socket.destroy(), REFUSED_DRAIN_MS).unref()
  socket.once("close", () => clearTimeout(timer))
}

/**
 * Hands a request on to the application, with the body the lane already read from it; `note` sees the request the
 * application will read first (to leave with it what the lane decided).
 */
export type PassOn = (body: Buffer, note?: (passed: IncomingMessage) => void) => void

/** Answers some requests without the application; see `src/http/fastLane.ts` and `src/foods/faces/lane.ts`. */
export interface Lane {
  /**
   * True when the lane takes the request: it then answers it, or reads its body and passes it on. False leaves the
   * request, untouched, to the application. Decided from the request line and headers alone.
   */
  readonly take: (request: IncomingMessage, response: ServerResponse, passOn: PassOn) => boolean
}

/** The same request with its body already read: what the application reads when the lane passes a request on. */
const withBody = (request: IncomingMessage, body: Buffer): IncomingMessage => {
  const copy = new IncomingMessage(request.socket)
  copy.method = request.method ?? "GET"
  copy.url = request.url ?? "/"
  copy.headers = request.headers
  copy.rawHeaders = request.rawHeaders
  copy.httpVersion = request.httpVersion
  copy.complete = true
  copy.push(body)
  copy.push(null)
  return copy
}

/**
 * The port opens before the application has attached its request handler (and stays open a moment after it is
 * detached on shutdown). Node leaves a request without a listener unanswered, so a client would hang: the first
 * listener answers such requests itself and steps aside once the application's is attached. While the application
 * is attached, the lanes (if any are attached) are offered each request first, in turn.
 */
export class FrontServer extends Server {
  readonly lanes: Array<Lane> = []

  /** Headers every answer carries (the sandbox's `Morsel-Sandbox: true`): the lanes', the application's, and those given before a route runs. */
  readonly stamp: Readonly<Record<string, string>>

  constructor(stamp: Readonly<Record<string, string>> = {}) {
    super()
    this.stamp = stamp
    // The peer's address, read once on arrival, is kept by the socket: once a client resets the connection the
    // system no longer tells it, and a request read after that would be counted as from an unknown address.
    this.on("connection", (socket: Socket) => void socket.remoteAddress)
    this.on("request", (request: IncomingMessage, response: ServerResponse) => {
      if (this.listenerCount("request") > 1) return
      // The body is read (and dropped) first: this answer closes the connection, which would reset it mid-body.
      void readBody(request, 0).then(() => {
        response.writeHead(503, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(NOT_READY),
          "retry-after": "1",
          connection: "close"
        })
        response.end(NOT_READY)
      })
    })
    this.on("clientError", refuseConnection(new WeakSet()))
  }

  override emit(event: string, ...args: Array<unknown>): boolean {
    const [request, response] = args
    // Set before anything answers, so no early answer (a 413, a 503 while starting) goes out without it.
    if (event === "request" && response instanceof ServerResponse) for (const [name, value] of Object.entries(this.stamp)) response.setHeader(name, value)
    if (
      event === "request" &&
      this.lanes.length > 0 &&
      this.listenerCount("request") > 1 &&
      request instanceof IncomingMessage &&
      response instanceof ServerResponse
    ) {
      const passOn: PassOn = (body, note) => {
        const passed = withBody(request, body)
        note?.(passed)
        super.emit("request", passed, response)
      }
      for (const lane of this.lanes) if (lane.take(request, response, passOn)) return true
    }
    return super.emit(event, ...args)
  }
}

/** The Node server the service listens on, for a lane to attach to; absent when a composition brings its own server. */
export class FrontDoor extends Context.Tag("morsel/FrontDoor")<FrontDoor, FrontServer>() {}

/** Listens on host:port with a FrontServer; `stamp` adds headers to the lane's answers. */
export const nodeServer = (options: { readonly host: string; readonly port: number; readonly stamp?: Readonly<Record<string, string>> }) =>
  Layer.unwrapEffect(
    Effect.sync(() => {
      const server = new FrontServer(options.stamp)
      return Layer.merge(NodeHttpServer.layer(() => server, { host: options.host, port: options.port }), Layer.succeed(FrontDoor, server))
    })
  )
