/**
 * The Node HTTP server under the service: it answers 503 with Retry-After whenever the application is not attached,
 * and lets a fast lane answer the hottest requests before the application sees them.
 */
import { IncomingMessage, Server, ServerResponse } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer } from "effect"

const NOT_READY = JSON.stringify({
  _tag: "ServiceUnavailable",
  error: { code: "starting", message: "the service is starting or stopping; retry in a moment" }
})

/** Hands a request on to the application, with the body the lane already read from it. */
export type PassOn = (body: Buffer) => void

/** Answers some requests without the application; see `src/http/fastLane.ts` and `src/foods/lane.ts`. */
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
    this.on("request", (_request, response: ServerResponse) => {
      if (this.listenerCount("request") > 1) return
      response.writeHead(503, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(NOT_READY),
        "retry-after": "1",
        connection: "close"
      })
      response.end(NOT_READY)
    })
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
      const passOn = (body: Buffer) => super.emit("request", withBody(request, body), response)
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
