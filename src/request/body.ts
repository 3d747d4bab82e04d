/** Reading a request body whole, for the fast lane and for the checks every body passes before a route reads it. */
import { isAscii } from "node:buffer"
import type { IncomingMessage } from "node:http"

/** A body read whole; `too_large` once more than the limit arrived, `cut` when the client went away first. */
export type ReadBody = Buffer | "too_large" | "cut"

/**
 * How much of a body too large is read, counted from its first byte, and dropped before the 413 is sent and the
 * connection closed. A client that sends its whole body before it reads (Node's http client, fetch, curl) then
 * reads the 413: closing a connection with bytes still arriving resets it, and the client sees a broken pipe
 * instead. A body declared longer is answered at once, unread; one that turns out longer is cut off here.
 */
export const DRAIN_BYTES = 64 * 1024 * 1024

/** Bodies read up to DRAIN_BYTES and left unfinished: no later reader takes up the rest. */
const givenUp = new WeakSet<IncomingMessage>()

/**
 * Reads a body as the Buffers it arrives in, joined once. Decoded afterwards it is one flat string, where reading
 * it as text builds a rope of 64 KiB pieces that live through several garbage collections and that the JSON parser
 * copies once more. Past `maxBytes` nothing more is kept, and the rest is read and dropped up to DRAIN_BYTES (see
 * there); the answer then closes the connection.
 */
export const readBody = (request: IncomingMessage, maxBytes: number): Promise<ReadBody> =>
  new Promise((resolve) => {
    if (Number(request.headers["content-length"]) > DRAIN_BYTES || givenUp.has(request)) return resolve("too_large")
    // A body already read to its end has nothing more to give: waiting for its end would wait forever.
    if (request.readableEnded) return resolve("cut")
    if (request.destroyed) return resolve("cut")
    const chunks: Array<Buffer> = []
    let bytes = 0
    const finish = (body: ReadBody) => {
      request.off("data", onData).off("end", onEnd).off("error", onCut).off("aborted", onCut).off("close", onCut)
      resolve(body)
    }
    const onData = (chunk: Buffer) => {
      bytes += chunk.length
      if (bytes <= maxBytes) return void chunks.push(chunk)
      chunks.length = 0
      if (bytes <= DRAIN_BYTES) return
      request.pause()
      givenUp.add(request)
      finish("too_large")
    }
    // A body that arrived in one piece (a small one, or one the fast lane passes on) is not copied again.
    const onEnd = () => finish(bytes > maxBytes ? "too_large" : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes))
    const onCut = () => finish("cut")
    request.on("data", onData).on("end", onEnd).on("error", onCut).on("aborted", onCut).on("close", onCut)
  })

/**
 * A body that gives one key twice in an object (at any depth, the same key however it is escaped). JSON.parse keeps
 * the last; a proxy or another reader may keep the first. The service reads neither: it refuses the body.
 */
export class RepeatedKey extends Error {
  constructor(readonly key: string) {
    super(`JSON text repeats the key ${JSON.stringify(key)}`)
  }
}

/** The index of the quote closing the string opened at `open`, or -1 when the text ends first. */
export const closingQuote = (text: string, open: number): number => {
  for (let from = open + 1; ; ) {
    const quote = text.indexOf('"', from)
    if (quote < 0) return -1
    let backslashes = 0
    while (quote - backslashes - 1 > open && text.charCodeAt(quote - backslashes - 1) === 0x5c) backslashes++
    if (backslashes % 2 === 0) return quote
    from = quote + 1
  }
}

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d

/**
 * The first key (in text order) that an object of valid JSON text gives twice, compared as JSON.parse reads keys
 * (after unescaping); none when every object's keys differ. A string is a key when a colon follows it; strings are
 * skipped with indexOf, so an image costs a native search, not a loop over its characters.
 */
export const repeatedKey = (text: string): string | undefined => {
  // One entry per open object or array: an object's keys so far, or undefined for an array.
  const open: Array<Set<string> | undefined> = []
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      const end = closingQuote(text, i)
      if (end < 0) return undefined
      const keys = open[open.length - 1]
      let next = end + 1
      while (isSpace(text.charCodeAt(next))) next++
      if (keys !== undefined && text.charCodeAt(next) === 0x3a) {
        const raw = text.slice(i + 1, end)
        const key = raw.includes("\\") ? (JSON.parse(text.slice(i, end + 1)) as string) : raw
        if (keys.has(key)) return key
        keys.add(key)
      }
      i = end
    } else if (c === 0x7b) open.push(new Set())
    else if (c === 0x5b) open.push(undefined)
    else if (c === 0x7d || c === 0x5d) open.pop()
  }
  return undefined
}

/** `JSON.parse`, refusing text that repeats a key (`RepeatedKey`), where JSON.parse would keep the last. */
export const parseJson = (text: string): unknown => {
  const value: unknown = JSON.parse(text)
  const key = repeatedKey(text)
  if (key !== undefined) throw new RepeatedKey(key)
  return value
}

/** The image string below which a body is parsed as it is: lifting it out pays only for megabytes. */
const LIFT_AT_LEAST = 64 * 1024
const IMAGE_KEY = Buffer.from('"image_base64"')
/** What the lifted image's place holds while the rest is parsed: the escape of NUL, which the reviver finds. */
const HOLE = "\\u0000"

/** A body's JSON text with its image string lifted out, and that string. */
export interface LiftedBody {
  /** The body's text with `\u0000` in place of the image's characters. */
  readonly text: string
  readonly image: string
  /** Where the image's characters stand in `text`. */
  readonly at: number
}

const skipSpace = (bytes: Buffer, from: number): number => {
  let at = from
  while (bytes[at] === 0x20 || bytes[at] === 0x09 || bytes[at] === 0x0a || bytes[at] === 0x0d) at++
  return at
}

/**
 * Lifts a long `"image_base64"` string out of a body, when it is plain (ASCII without a backslash): the
 * megabytes are sliced from the bytes once, where decoding the whole body into text and parsing it copies them
 * twice more. A raw control character in that string, which makes the text invalid JSON, makes the image invalid
 * base64 too: the image's checks refuse it. None when there is nothing worth lifting.
 */
export const liftImage = (body: Buffer): LiftedBody | undefined => {
  const key = body.indexOf(IMAGE_KEY)
  if (key < 0) return undefined
  const colon = skipSpace(body, key + IMAGE_KEY.length)
  if (body[colon] !== 0x3a) return undefined
  const open = skipSpace(body, colon + 1)
  if (body[open] !== 0x22) return undefined
  const close = body.indexOf(0x22, open + 1)
  if (close - open - 1 < LIFT_AT_LEAST) return undefined
  const image = body.subarray(open + 1, close)
  if (image.includes(0x5c) || !isAscii(image)) return undefined
  const head = body.toString("utf8", 0, open + 1)
  return { text: head + HOLE + body.toString("utf8", close), image: image.toString("utf8"), at: head.length }
}

/** The whole text of a lifted body, made again only for a reader that asks for it. */
export const wholeText = ({ at, image, text }: LiftedBody): string => text.slice(0, at) + image + text.slice(at + HOLE.length)

/**
 * `parseJson` of a lifted body. Its text is trusted only when its one NUL string is the top-level object's
 * `image_base64` (the string was a value there, not text inside another string); anything else, a failure
 * included, is parsed whole, so the answer is JSON.parse's own. A repeated key is looked for in the lifted text: it
 * has the whole text's keys, since only a value's characters were taken out. The body's bytes are not needed: the
 * whole text is the same string (the pieces were cut at quotes, which no UTF-8 sequence spans).
 */
export const parseLifted = (lifted: LiftedBody): unknown => {
  const holes: Array<readonly [unknown, string]> = []
  let value: unknown
  try {
    value = JSON.parse(lifted.text, function (this: unknown, key, item: unknown) {
      if (item === "\u0000") holes.push([this, key])
      return item
    })
  } catch {
    // parsed whole below, for JSON.parse's own answer
  }
  const [hole] = holes
  if (holes.length === 1 && hole![0] === value && hole![1] === "image_base64" && typeof value === "object" && value !== null) {
    const key = repeatedKey(lifted.text)
    if (key !== undefined) throw new RepeatedKey(key)
    return Object.assign(value, { image_base64: lifted.image })
  }
  return parseJson(wholeText(lifted))
}

/** `parseJson` of a body, its image lifted out when it can be (see `liftImage` and `parseLifted`). */
export const parseBody = (body: Buffer): unknown => {
  const lifted = liftImage(body)
  return lifted === undefined ? parseJson(body.toString("utf8")) : parseLifted(lifted)
}
