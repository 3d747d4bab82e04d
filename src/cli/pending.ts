/** Analyses answered `payment_pending`, kept by the CLI in its state folder so `--resume` sends the identical retry. */
import { mkdir, readFile, rm, writeFile } from "node:fs/promises"
import { homedir } from "node:os"
import { join } from "node:path"
import { Effect, Option, Schema } from "effect"
import { CliFailure } from "./client.ts"

/**
 * What the identical retry needs: where it went, its headers (Idempotency-Key, PAYMENT-SIGNATURE, …) and its body.
 * A credit key is never kept: `withCreditKey` says the retry must carry one, given again to `--resume`.
 */
export const PendingAnalysis = Schema.Struct({
  url: Schema.String,
  headers: Schema.Record({ key: Schema.String, value: Schema.String }),
  body: Schema.Unknown,
  withCreditKey: Schema.optionalWith(Schema.Boolean, { default: () => false })
})
export type PendingAnalysis = typeof PendingAnalysis.Type

/** MORSEL_STATE_DIR, else the XDG state folder (`~/.local/state/morsel`). */
export const stateDir = () =>
  process.env["MORSEL_STATE_DIR"] || join(process.env["XDG_STATE_HOME"] || join(homedir(), ".local", "state"), "morsel")

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A request id as the service makes them, a UUID in any letter case, in its canonical lower-case form; else none. */
export const canonicalRequestId = (id: string): Option.Option<string> => (UUID.test(id) ? Option.some(id.toLowerCase()) : Option.none())

// Only a canonical UUID names a file: nothing a server or a person types can point elsewhere.
const fileOf = (canonical: string) => join(stateDir(), "pending", `${canonical}.json`)

/** Keeps a pending analysis under its request id (a UUID); readable by its owner only (it holds a signed payment). */
export const savePending = (id: string, pending: PendingAnalysis) =>
  Effect.gen(function* () {
    const canonical = canonicalRequestId(id)
    if (Option.isNone(canonical)) return yield* new CliFailure({ code: "invalid_request_id", message: `not a request id: ${JSON.stringify(id)}` })
    const { authorization, ...headers } = pending.headers
    const kept: PendingAnalysis = { ...pending, headers, withCreditKey: pending.withCreditKey || authorization !== undefined }
    yield* Effect.tryPromise({
      try: async () => {
        await mkdir(join(stateDir(), "pending"), { recursive: true, mode: 0o700 })
        await writeFile(fileOf(canonical.value), JSON.stringify(kept), { mode: 0o600 })
      },
      catch: (cause) =>
        new CliFailure({
          code: "state_unwritable",
          message: `cannot keep the pending payment in ${stateDir()} (${cause instanceof Error ? cause.message : String(cause)}): set MORSEL_STATE_DIR to a writable folder`
        })
    })
    return canonical.value
  })

/** The pending analysis kept under `id`. */
export const loadPending = (id: string) =>
  Effect.gen(function* () {
    const missing = new CliFailure({
      code: "unknown_request",
      message: `no pending analysis ${id} is kept in ${stateDir()}: give the request_id printed with payment_pending`
    })
    const canonical = canonicalRequestId(id)
    if (Option.isNone(canonical)) return yield* missing
    const text = yield* Effect.tryPromise({ try: () => readFile(fileOf(canonical.value), "utf8"), catch: () => missing })
    return yield* Schema.decodeUnknown(Schema.parseJson(PendingAnalysis))(text).pipe(Effect.mapError(() => missing))
  })

/** Forgets a pending analysis once it is settled. */
export const forgetPending = (id: string) =>
  Option.match(canonicalRequestId(id), { onNone: () => Effect.void, onSome: (canonical) => Effect.promise(() => rm(fileOf(canonical), { force: true })) })
