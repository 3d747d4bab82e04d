/**
 * `morsel/client` for Node: analyse any photo (a path, bytes, a Blob or a File), paid with card credits or over
 * x402, and use the credit and foods endpoints. Photos are prepared with sharp, as `morsel analyze` prepares them.
 */
import { type ClientOptions, createClientWith, type MorselClient } from "./core.ts"
import { preparePhoto } from "./photo.node.ts"

export type { AnalyzeOptions, ClientOptions, MorselClient, Photo } from "./core.ts"
export { newIdempotencyKey, uuidV4 } from "./core.ts"
export { MorselError, type MorselErrorFields } from "./errors.ts"
export type * from "./types.ts"

/** A client of the morsel server at `baseUrl`, paying with `apiKey` (card credits) or `walletPrivateKey` (x402). */
export const createClient = (options: ClientOptions): MorselClient => createClientWith(options, preparePhoto)
