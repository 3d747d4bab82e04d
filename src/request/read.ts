/** How every face reads a request before its route decodes it: whether it is JSON, its whole body within the limit, how deep it nests. */
import { IncomingMessage } from "node:http"
import { HttpIncomingMessage, type HttpServerRequest } from "@effect/platform"
import { Effect, Option } from "effect"
import { MAX_BODY_BYTES } from "../domain/bodies.ts"
import { closingQuote, type ReadBody, readBody } from "./body.ts"

export const isJson = (contentType: string | undefined) =>
  contentType !== undefined && contentType.split(";")[0]!.trim().toLowerCase() === "application/json"

/**
 * What is wrong with the shape of JSON text, if anything: arrays and objects nested deeper than `maxDepth`, or more
 * of them than `maxContainers` (brackets inside strings do not count). A string is skipped with indexOf to its
 * closing quote (one not escaped by an odd run of backslashes): a 2.7 MB image costs a few native searches, not a
 * loop over every character; the count stops the scan as soon as it is passed.
 */
export const jsonShapeRefusal = (text: string, maxDepth: number, maxContainers: number): "too_deep" | "too_many" | undefined => {
  let depth = 0
  let containers = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      const end = closingQuote(text, i)
      if (end < 0) return undefined
      i = end
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return "too_deep"
      if (++containers > maxContainers) return "too_many"
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  return undefined
}

/** Whether JSON text nests arrays and objects deeper than `max` (see `jsonShapeRefusal`). */
export const nestsDeeperThan = (text: string, max: number): boolean => jsonShapeRefusal(text, max, Number.POSITIVE_INFINITY) === "too_deep"

/** The body, read as Buffers from a Node request (see `readBody`), else as the platform reads its text. */
export const readWhole = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<Buffer | string | Exclude<ReadBody, Buffer>> => {
  const source = request.source
  return source instanceof IncomingMessage
    ? Effect.promise(() => readBody(source, MAX_BODY_BYTES))
    : request.text.pipe(HttpIncomingMessage.withMaxBodySize(Option.some(MAX_BODY_BYTES)), Effect.orElseSucceed(() => "too_large" as const))
}
