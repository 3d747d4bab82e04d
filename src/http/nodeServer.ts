/** The Node HTTP server under the service: it answers 503 with Retry-After whenever the application is not attached. */
import { createServer, type Server } from "node:http"

const NOT_READY = JSON.stringify({
  _tag: "ServiceUnavailable",
  error: { code: "starting", message: "the service is starting or stopping; retry in a moment" }
})

/**
 * The port opens before the application has attached its request handler (and stays open a moment after it
 * is detached on shutdown). Node leaves a request without a listener unanswered, so a client would hang:
 * this first listener answers such requests itself and steps aside once the application's is attached.
 */
export const createServerAnsweringUntilReady = (): Server => {
  const server = createServer()
  server.on("request", (_request, response) => {
    if (server.listenerCount("request") > 1) return
    response.writeHead(503, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(NOT_READY),
      "retry-after": "1",
      connection: "close"
    })
    response.end(NOT_READY)
  })
  return server
}
