/** Analyses answered `payment_pending`, kept by the CLI in its state folder so `--resume` sends the identical retry. */
import { mkdir, readFile, rm, writeFile } from "node:fs/promises"
import { homedir } from "node:os"
import { join } from "node:path"
import { Effect, Schema } from "effect"
import { CliFailure } from "./client.ts"

/** What the identical retry needs: where it went, its headers (Idempotency-Key, PAYMENT-SIGNATURE, …) and its body. */
export const PendingAnalysis = Schema.Struct({
  url: Schema.String,
  headers: Schema.Record({ key: Schema.String, value: Schema.String }),
  body: Schema.Unknown
})
export type PendingAnalysis = typeof PendingAnalysis.Type

/** MORSEL_STATE_DIR, else the XDG state folder (`~/.local/state/morsel`). */
export const stateDir = () =>
  process.env["MORSEL_STATE_DIR"] || join(process.env["XDG_STATE_HOME"] || join(homedir(), ".local", "state"), "morsel")

const ID = /^[A-Za-z0-9_-]{1,128}$/

// Request ids are UUIDs, accepted in any letter case.
const fileOf = (id: string) => join(stateDir(), "pending", `${id.toLowerCase()}.json`)

/** Keeps a pending analysis under its request id; readable by its owner only (it holds a signed payment). */
export const savePending = (id: string, pending: PendingAnalysis) =>
  Effect.tryPromise({
    try: async () => {
      await mkdir(join(stateDir(), "pending"), { recursive: true, mode: 0o700 })
      await writeFile(fileOf(id), JSON.stringify(pending), { mode: 0o600 })
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
    if (!ID.test(id)) return yield* missing
    const text = yield* Effect.tryPromise({ try: () => readFile(fileOf(id), "utf8"), catch: () => missing })
    return yield* Schema.decodeUnknown(Schema.parseJson(PendingAnalysis))(text).pipe(Effect.mapError(() => missing))
  })

/** Forgets a pending analysis once it is settled. */
export const forgetPending = (id: string) => Effect.promise(() => rm(fileOf(id), { force: true }))
