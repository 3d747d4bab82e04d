/** Analyses answered `payment_pending`, kept by the CLI in its state folder so `--resume` sends the identical retry. */
import { mkdir, readFile, rm, writeFile } from "node:fs/promises"
import { homedir } from "node:os"
import { join } from "node:path"
import { Effect, Schema } from "effect"
import type { PendingAnalysis as ClientPending } from "../client/index.ts"
import { CliFailure } from "./client.ts"

/**
 * What the identical retry needs: the server, and the client's pending request (body, Idempotency-Key, signed
 * authorization). Never the credit key: `withCreditKey` says the retry must carry one, given again to `--resume`.
 */
export const PendingAnalysis = Schema.Struct({
  baseUrl: Schema.String,
  withCreditKey: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  pending: Schema.Struct({
    body: Schema.Struct({
      image_base64: Schema.String,
      mime_type: Schema.Literal("image/jpeg", "image/png"),
      language: Schema.Literal("en", "lt"),
      known_total_grams: Schema.optional(Schema.Number)
    }),
    idempotencyKey: Schema.String,
    paymentSignature: Schema.optional(Schema.String),
    scenario: Schema.optional(Schema.String)
  })
})
export type PendingAnalysis = typeof PendingAnalysis.Type

/** MORSEL_STATE_DIR, else the XDG state folder (`~/.local/state/morsel`). */
export const stateDir = () =>
  process.env["MORSEL_STATE_DIR"] || join(process.env["XDG_STATE_HOME"] || join(homedir(), ".local", "state"), "morsel")

// Request ids are UUIDs, accepted in any letter case; nothing else ever names a file.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A request id fit to name a file: a well-formed UUID, in lower case. */
export const pendingIdOf = (id: string | undefined): string | undefined => (id !== undefined && UUID.test(id) ? id.toLowerCase() : undefined)

const fileOf = (id: string) => join(stateDir(), "pending", `${id.toLowerCase()}.json`)

/** Keeps a pending analysis under its request id (a UUID the server sent); readable by its owner only (it holds a signed payment). */
export const savePending = (id: string, baseUrl: string, pending: ClientPending, withCreditKey: boolean) =>
  Effect.tryPromise({
    try: async () => {
      await mkdir(join(stateDir(), "pending"), { recursive: true, mode: 0o700 })
      const kept: PendingAnalysis = { baseUrl, withCreditKey, pending }
      await writeFile(fileOf(id), JSON.stringify(kept), { mode: 0o600 })
    },
    catch: (cause) =>
      new CliFailure({
        code: "state_unwritable",
        message: `cannot keep the pending payment in ${stateDir()} (${cause instanceof Error ? cause.message : String(cause)}): set MORSEL_STATE_DIR to a writable folder`
      })
  })

/** The pending analysis kept under `id`. */
export const loadPending = (id: string) =>
  Effect.gen(function* () {
    const missing = new CliFailure({
      code: "unknown_request",
      message: `no pending analysis ${id} is kept in ${stateDir()}: give the request_id printed with payment_pending`
    })
    if (pendingIdOf(id) === undefined) return yield* missing
    const text = yield* Effect.tryPromise({ try: () => readFile(fileOf(id), "utf8"), catch: () => missing })
    return yield* Schema.decodeUnknown(Schema.parseJson(PendingAnalysis))(text).pipe(Effect.mapError(() => missing))
  })

/** Forgets a pending analysis once it is settled. */
export const forgetPending = (id: string) => Effect.promise(() => rm(fileOf(id), { force: true }))
