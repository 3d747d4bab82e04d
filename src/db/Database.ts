/** The PostgreSQL store: a real server when DATABASE_URL is set, otherwise embedded PGlite, migrated at start. */
import { mkdtempSync, rmSync } from "node:fs"
import { mkdir } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Data, Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../config.ts"
import { migrate } from "./migrations.ts"

export class DatabaseUnavailable extends Data.TaggedError("DatabaseUnavailable")<{
  readonly message: string
  readonly cause?: unknown
}> {}

const POOL_SIZE = 8
/**
 * PGlite has one backend: statements of concurrent connections interleave on it and break the extended query
 * protocol ("portal does not exist"), so the embedded database is used through a single connection.
 */
const EMBEDDED_POOL_SIZE = 1

/**
 * PostgreSQL's default shared_buffers (128 MB) is allocated inside PGlite's WebAssembly memory and stays resident:
 * about 120 MiB of the process for a cache the embedded database, a single instance's store, never fills.
 */
const EMBEDDED_SETTINGS = ["shared_buffers = 16MB"]

/** Starts PGlite on a private unix socket so the ordinary pg driver can talk to it. */
export const embedded = (dataDir: string, options: { readonly loadDataDir?: Blob } = {}) =>
  Effect.map(startEmbedded(dataDir, options), (started) => started.target)

/** Like `embedded`, also giving a snapshot of the database files (to clone in-memory databases quickly). */
export const startEmbedded = (dataDir: string, options: { readonly loadDataDir?: Blob } = {}) =>
  Effect.gen(function* () {
    const inMemory = dataDir === "memory://"
    if (!inMemory) yield* Effect.promise(() => mkdir(resolve(dataDir), { recursive: true }))
    const db = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          PGlite.create({
            dataDir: inMemory ? undefined : resolve(dataDir),
            postgresqlconf: EMBEDDED_SETTINGS,
            ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {})
          }),
        catch: (cause) => new DatabaseUnavailable({ message: `cannot open the embedded database in ${dataDir}`, cause })
      }),
      (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
    )
    // Unix socket paths are short (~100 bytes), so the socket lives in a fresh temporary folder.
    const socketDir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "morsel-pg-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const server = new PGLiteSocketServer({ db, path: join(socketDir, ".s.PGSQL.5432"), maxConnections: 4 })
          await server.start()
          return server
        },
        catch: (cause) => new DatabaseUnavailable({ message: "cannot start the embedded database socket", cause })
      }),
      (server) => Effect.promise(() => server.stop()).pipe(Effect.ignore)
    )
    const target: PgTarget = { embedded: true, host: socketDir, port: 5432, database: "postgres", username: "postgres" }
    return { target, snapshot: Effect.promise(() => db.dumpDataDir("none")) }
  })

export interface PgTarget {
  readonly embedded?: boolean
  readonly url?: Redacted.Redacted
  readonly host?: string
  readonly port?: number
  readonly database?: string
  readonly username?: string
}

/** A migrated PgClient/SqlClient for an explicit target. */
export const layerFor = ({ embedded, ...target }: PgTarget) =>
  Layer.effectDiscard(migrate).pipe(
    Layer.provideMerge(
      PgClient.layer({ ...target, maxConnections: embedded ? EMBEDDED_POOL_SIZE : POOL_SIZE, idleTimeout: "60 seconds" })
    )
  )

/** The store chosen by the settings: DATABASE_URL, else PGlite in MORSEL_DATA_DIR. */
export const layer = Layer.unwrapScoped(
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const target: PgTarget = Option.isSome(settings.databaseUrl)
      ? { url: settings.databaseUrl.value }
      : yield* embedded(settings.dataDir)
    return layerFor(target)
  })
)

export type Sql = SqlClient.SqlClient
export const Sql = SqlClient.SqlClient
export { Redacted }
