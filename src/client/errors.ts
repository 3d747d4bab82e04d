/** The one error `morsel/client` rejects with: the server's refusal (status, `error.code`, request_id) or a local failure. */
import type { PendingAnalysis } from "./types.ts"

export interface MorselErrorFields {
  /** HTTP status of the server's answer; undefined when no answer came (a photo it cannot read, a server it cannot reach). */
  readonly status?: number | undefined
  /** The server's `error.code` (`insufficient_credits`, `payment_pending`, …), or the client's own (`photo_unreadable`, `server_unreachable`, …). */
  readonly code: string
  readonly message: string
  /** The request_id the server named, when there is one: quote it to support. */
  readonly requestId?: string | undefined
  /** Retry-After in seconds, when the server sent it. */
  readonly retryAfter?: number | undefined
  /** The server's JSON answer as it came. */
  readonly body?: unknown
  /** On `payment_pending`: what `client.resume` needs to send the identical retry later. */
  readonly pending?: PendingAnalysis | undefined
  readonly cause?: unknown
}

export class MorselError extends Error {
  override readonly name = "MorselError"
  readonly status: number | undefined
  readonly code: string
  readonly requestId: string | undefined
  readonly retryAfter: number | undefined
  readonly body: unknown
  readonly pending: PendingAnalysis | undefined

  constructor(fields: MorselErrorFields) {
    super(fields.message, fields.cause === undefined ? undefined : { cause: fields.cause })
    this.status = fields.status
    this.code = fields.code
    this.requestId = fields.requestId
    this.retryAfter = fields.retryAfter
    this.body = fields.body
    this.pending = fields.pending
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

/** The `error` object of a refusal, when its body has one. */
const errorOf = (body: unknown): Record<string, unknown> | undefined => (isRecord(body) && isRecord(body["error"]) ? body["error"] : undefined)

/** The request_id of a refusal, in its `error` object or beside it. */
export const requestIdOf = (body: unknown): string | undefined => {
  const inner = errorOf(body)?.["request_id"]
  if (typeof inner === "string") return inner
  return isRecord(body) && typeof body["request_id"] === "string" ? body["request_id"] : undefined
}

/** A refusal of the server as a MorselError: "HTTP 422 no_food_detected: …". */
export const refusal = (status: number, body: unknown, retryAfter: number | undefined, pending?: PendingAnalysis) => {
  const error = errorOf(body)
  const code = typeof error?.["code"] === "string" ? error["code"] : `http_${status}`
  const detail = error !== undefined && "message" in error ? `${code}: ${String(error["message"])}` : typeof body === "string" ? body : JSON.stringify(body)
  return new MorselError({
    status,
    code,
    message: `HTTP ${status} ${detail}${retryAfter === undefined ? "" : ` (retry after ${retryAfter} s)`}`,
    requestId: requestIdOf(body),
    retryAfter,
    body,
    pending
  })
}

/** The innermost reason of a failed connection ("connect ECONNREFUSED 127.0.0.1:8787"), not the wrappers' "fetch failed". */
const rootCause = (cause: unknown): string => {
  let current = cause
  while (current instanceof Error && current.cause instanceof Error) current = current.cause
  return current instanceof Error ? current.message : String(current)
}

/** A server that cannot be reached. */
export const unreachable = (baseUrl: string, cause: unknown) =>
  new MorselError({ code: "server_unreachable", message: `cannot reach the morsel server at ${baseUrl} (${rootCause(cause)})`, cause })
