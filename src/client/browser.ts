/**
 * `morsel/client` in the browser: the same client, with photos prepared as the web page prepares them (the
 * browser decodes, turns upright and re-encodes on a canvas; HEIC where the browser reads it). No sharp, no Node.
 */
import { preparePhoto as preparePagePhoto } from "../web/static/photo.js"
import { type ClientOptions, createClientWith, type MorselClient, type Photo } from "./core.ts"
import { MorselError } from "./errors.ts"
import type { PreparedPhoto } from "./types.ts"

export type { AnalyzeOptions, ClientOptions, MorselClient, Photo } from "./core.ts"
export { newIdempotencyKey, uuidV4 } from "./core.ts"
export { MorselError, type MorselErrorFields } from "./errors.ts"
export type * from "./types.ts"

/** The type of bytes by their first ones, so the browser is told what it decodes. */
const sniff = (bytes: Uint8Array) => {
  const text = String.fromCharCode(...bytes.subarray(0, 12))
  if (bytes[0] === 0xff && bytes[1] === 0xd8) return "image/jpeg"
  if (text.startsWith("\x89PNG")) return "image/png"
  if (text.startsWith("RIFF") && text.slice(8, 12) === "WEBP") return "image/webp"
  if (text.slice(4, 8) === "ftyp") return "image/heic"
  return ""
}

const prepare = async (photo: Photo): Promise<PreparedPhoto> => {
  if (typeof photo === "string") throw new MorselError({ code: "usage", message: "a file path can be read only in Node: give the photo's Blob, File or bytes" })
  const blob = photo instanceof Blob ? photo : new Blob([photo], { type: sniff(photo instanceof ArrayBuffer ? new Uint8Array(photo) : photo) })
  const prepared = await preparePagePhoto(blob)
  if (prepared.error !== undefined) throw new MorselError({ code: "photo_unreadable", message: prepared.error })
  URL.revokeObjectURL(prepared.url)
  const binary = atob(prepared.base64)
  return { bytes: Uint8Array.from(binary, (c) => c.charCodeAt(0)), mime: prepared.mime, change: prepared.note }
}

/** A client of the morsel server at `baseUrl`, paying with `apiKey` (card credits) or `walletPrivateKey` (x402). */
export const createClient = (options: ClientOptions): MorselClient => createClientWith(options, prepare)
