/** Reading a request body whole, for the fast lane and for the checks every body passes before a route reads it. */
import type { IncomingMessage } from "node:http"

/** A body read whole; `too_large` once more than the limit arrived, `cut` when the client went away first. */
export type ReadBody = Buffer | "too_large" | "cut"

/**
 * Reads a body as the Buffers it arrives in, joined once. Decoded afterwards it is one flat string, where reading
 * it as text builds a rope of 64 KiB pieces that live through several garbage collections and that the JSON parser
 * copies once more. Past `maxBytes` the rest is left unread (the answer closes the connection).
 */
export const readBody = (request: IncomingMessage, maxBytes: number): Promise<ReadBody> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    let bytes = 0
    const finish = (body: ReadBody) => {
      request.off("data", onData).off("end", onEnd).off("error", onCut).off("aborted", onCut)
      resolve(body)
    }
    const onData = (chunk: Buffer) => {
      bytes += chunk.length
      if (bytes > maxBytes) return finish("too_large")
      chunks.push(chunk)
    }
    // A body that arrived in one piece (a small one, or one the fast lane passes on) is not copied again.
    const onEnd = () => finish(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes))
    const onCut = () => finish("cut")
    request.on("data", onData).on("end", onEnd).on("error", onCut).on("aborted", onCut)
  })
