/** Small HTTP helpers for tests: fetch against a running server, and reading a request body in a fake server. */
import type { IncomingMessage, Server } from "node:http"

export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: unknown
  readonly text: string
}

export const send = async (
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: unknown; rawBody?: string | Uint8Array } = {}
): Promise<Answer> => {
  const hasBody = init.body !== undefined || init.rawBody !== undefined
  const response = await fetch(url, {
    method: init.method ?? (hasBody ? "POST" : "GET"),
    headers: { ...(init.body !== undefined ? { "content-type": "application/json" } : {}), ...init.headers },
    ...(hasBody ? { body: init.rawBody ?? JSON.stringify(init.body) } : {})
  })
  const text = await response.text()
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: response.status, headers: response.headers, body, text }
}

/** `error.code` of an error body, for compact assertions. */
export const errorCode = (answer: Answer): unknown =>
  isRecord(answer.body) && isRecord(answer.body["error"]) ? answer.body["error"]["code"] : undefined

export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

/** The whole body of a request received by one of our fake servers, as text. */
export const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

/** Stops a fake server at once, keep-alive connections included. */
export const closeServer = (server: Server): Promise<void> =>
  new Promise((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections()
  })

/** One sample's value in a Prometheus text page (`series` with its labels as printed), or undefined. */
export const metricSample = (page: string, series: string): number | undefined => {
  const line = page.split("\n").find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}
