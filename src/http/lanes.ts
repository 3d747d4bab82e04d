/**
 * What the lanes share (`fastLane.ts`, `src/foods/faces/lane.ts`): the service's own Node server to attach to, and how a
 * lane answers, with the headers, counters and log line the HttpApi stack's middleware gives an answer.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { Effect, FiberRef, FiberRefs, LogLevel, Option, Runtime } from "effect"
import { AppConfig } from "../config.ts"
import { countNow, fastLaneAnswers, httpRequests } from "../observability/metrics.ts"
import { FrontDoor, type FrontServer, type Lane } from "./nodeServer.ts"
import { isJson } from "../request/read.ts"

export interface LaneAnswer {
  readonly method: "GET" | "POST"
  readonly route: string
  /** The `answer` label of `morsel_fast_lane_answers_total`. */
  readonly kind: string
  readonly status: number
  readonly body: string
  readonly headers?: Readonly<Record<string, string>>
}

export interface LaneDoor {
  readonly server: FrontServer
  readonly answer: (response: ServerResponse, answer: LaneAnswer) => void
}

/** The server a lane attaches to: none when the composition brings its own server, or when requests are traced (each gets its spans in the stack). */
export const laneDoor = Effect.gen(function* () {
  const door = yield* Effect.serviceOption(FrontDoor)
  const settings = yield* AppConfig
  if (Option.isNone(door) || Option.isSome(settings.otlpEndpoint)) return Option.none<LaneDoor>()
  const server = door.value
  const runtime = yield* Effect.runtime<never>()
  const logsRequests = LogLevel.greaterThanEqual(LogLevel.Debug, FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentMinimumLogLevel))

  /** What the stack's middleware does for every answer: count it, and log it where the level admits (src/observability/requestLog.ts). */
  const observe = ({ kind, method, route, status }: LaneAnswer) => {
    countNow(fastLaneAnswers, { answer: kind })
    if (settings.metrics) countNow(httpRequests, { route, status: String(status) })
    if (logsRequests) {
      Runtime.runFork(runtime)(
        Effect.logDebug("Sent HTTP response").pipe(
          Effect.annotateLogs({ "http.method": method, "http.url": route, "http.status": status }),
          Effect.withLogSpan("http.span.lane")
        )
      )
    }
  }

  const answer = (response: ServerResponse, answer: LaneAnswer) => {
    response.writeHead(answer.status, {
      ...server.stamp,
      ...answer.headers,
      "content-type": "application/json",
      "content-length": Buffer.byteLength(answer.body)
    })
    response.end(answer.body)
    observe(answer)
  }
  return Option.some<LaneDoor>({ server, answer })
})

/** Offers `lane` every request while the scope is open (a server's lanes are asked in the order they were attached). */
export const attachLane = (server: FrontServer, lane: Lane) =>
  Effect.acquireRelease(
    Effect.sync(() => server.lanes.push(lane)),
    () => Effect.sync(() => server.lanes.splice(server.lanes.indexOf(lane), 1))
  )

/**
 * Whether a request is one a lane may read: `POST path` with JSON of a stated length up to `maxBytes`. Browsers
 * (CORS), the sandbox's scenarios and bodies of unknown length take the whole stack.
 */
export const isPlainPost = (request: IncomingMessage, path: string, maxBytes: number): boolean => {
  const headers = request.headers
  if (request.method !== "POST" || request.url !== path) return false
  if (headers.origin !== undefined || headers["sandbox-scenario"] !== undefined || headers["transfer-encoding"] !== undefined) return false
  const length = Number(headers["content-length"])
  return isJson(headers["content-type"]) && Number.isSafeInteger(length) && length > 0 && length <= maxBytes
}
