/**
 * The log of answered requests: one line per answer at DEBUG (`LOG_LEVEL=debug`), around the whole HTTP chain as
 * the platform's logger was. A line per request at INFO, formatted and written on the serving thread, was the largest
 * part of what a cheap answer cost; at the default level an answer now costs no log work. Failures that become a
 * 500 are logged at ERROR where they are answered (`lastResort` in src/http/transport.ts).
 */
import { HttpServerError, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { Context, Effect, Exit, FiberRef, LogLevel } from "effect"

export const requestLog = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.withFiberRuntime<HttpServerResponse.HttpServerResponse, E, R>((fiber) => {
    if (!LogLevel.greaterThanEqual(LogLevel.Debug, fiber.getFiberRef(FiberRef.currentMinimumLogLevel))) return app
    const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
    return Effect.onExit(app, (exit) =>
      Effect.logDebug("Sent HTTP response").pipe(
        Effect.annotateLogs({
          "http.method": request.method,
          "http.url": request.url,
          "http.status": Exit.isSuccess(exit) ? exit.value.status : HttpServerError.causeResponseStripped(exit.cause)[0].status
        })
      )
    )
  })
