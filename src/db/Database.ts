/** The PostgreSQL store: a real server when DATABASE_URL is set, otherwise embedded PGlite, migrated at start. */
import { execFile } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, openAsBlob, readdirSync, rmSync, writeFileSync } from "node:fs"
import { mkdir } from "node:fs/promises"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { setFlagsFromString } from "node:v8"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Data, Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../config.ts"
import { isAbandoned, LOCK_FILE, lockDataFolder } from "./dataFolderLock.ts"
import { migrate } from "./migrations.ts"
import { embeddedPool } from "./prepared.ts"
import { silenceLimitedSocket } from "./silence.ts"
import { socketFolder } from "./socketFolder.ts"

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
 * PostgreSQL's default shared_buffers (128 MB) is allocated inside PGlite's WebAssembly memory and stays resident
 * once used: about 120 MiB of the process for a cache a single instance's store does not need. A page missed here
 * is read from the operating system's file cache, a few microseconds away. 4 MB, for a folder as for an in-memory
 * database: 8 MB held 4 MiB more at rest and 6 MiB more at the peak of three photos, for analyses no faster.
 */
const SETTINGS = ["shared_buffers = 4MB"]

/**
 * Creates a new embedded database (initdb) in a Node process of its own: initdb grows PGlite's WebAssembly memory
 * to about 600 MiB, which a WebAssembly memory never gives back, so the server would keep it for its whole life.
 * Writes the database into `dataDir`, or, for an in-memory one, its files as a tar archive into `archive`.
 */
const INITDB = `
const [pglite, dataDir, archive, settings] = process.argv.slice(1)
const { PGlite } = require(pglite)
const { writeFileSync } = require("node:fs")
PGlite.create({ dataDir: dataDir || undefined, postgresqlconf: JSON.parse(settings) })
  .then(async (db) => {
    if (archive) writeFileSync(archive, Buffer.from(await (await db.dumpDataDir("none")).arrayBuffer()))
    await db.close()
  })
  .then(() => process.exit(0), (error) => { console.error(String(error && error.message || error)); process.exit(1) })
`

const initdbApart = (dataDir: string | undefined, archive: string | undefined) =>
  Effect.async<void, DatabaseUnavailable>((resume) => {
    const pglite = createRequire(import.meta.url).resolve("@electric-sql/pglite")
    const child = execFile(
      process.execPath,
      ["-e", INITDB, pglite, dataDir ?? "", archive ?? "", JSON.stringify(SETTINGS)],
      { maxBuffer: 1 << 20 },
      (error, _stdout, stderr) =>
        resume(
          error === null
            ? Effect.void
            : Effect.fail(new DatabaseUnavailable({ message: `cannot create the embedded database: ${stderr.trim() || error.message}`, cause: error }))
        )
    )
    return Effect.sync(() => child.kill())
  })

/**
 * The files of a new database, written by `npm run build` so that first starts and in-memory databases start without
 * initdb: made by initdb apart, migrated, given what `fill` stores (the shipped foods), vacuumed and checkpointed, so
 * that a start that unpacks them has nothing left to write.
 */
export const writeNewDatabaseArchive = <E>(archive: string, fill: Effect.Effect<unknown, E, SqlClient.SqlClient> = Effect.void) =>
  Effect.scoped(
    Effect.gen(function* () {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "morsel-initdb-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      yield* initdbApart(undefined, join(dir, "pgdata.tar"))
      const loadDataDir = yield* Effect.promise(() => openAsBlob(join(dir, "pgdata.tar")))
      const started = yield* startEmbedded("memory://", { loadDataDir })
      yield* Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* fill
        yield* sql`VACUUM ANALYZE`
        yield* sql`CHECKPOINT`
      }).pipe(Effect.provide(layerFor(started.target)))
      const files = yield* started.snapshot
      yield* Effect.promise(async () => writeFileSync(archive, Buffer.from(await files.arrayBuffer())))
    })
  )

/** Where the build left them, from the source (src/db), the compiled modules (dist/src/db) or the bundle (dist/bundle). */
const builtArchive = (): string | undefined =>
  ["../../dist/new-database.tar", "../../new-database.tar", "../new-database.tar"]
    .map((path) => fileURLToPath(new URL(path, import.meta.url)))
    .find((path) => existsSync(path))

/**
 * A new, empty in-memory database loaded from an archive read from a file (PGlite keeps the Blob it loaded, which
 * would otherwise hold the archive's bytes for the life of the server): the build's archive when there is one (no
 * initdb at all, so a small container can start it), else one made apart (see INITDB).
 */
const newInMemory = <A, E, R>(open: (archive: Blob) => Effect.Effect<A, E, R>) => {
  const madeApart = Effect.acquireUseRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "morsel-initdb-"))),
    (dir) =>
      initdbApart(undefined, join(dir, "pgdata.tar")).pipe(
        Effect.zipRight(Effect.promise(() => openAsBlob(join(dir, "pgdata.tar")))),
        Effect.flatMap(open)
      ),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  const built = builtArchive()
  // An archive of another PGlite version (a build older than node_modules) does not load: initdb then runs here.
  return built === undefined ? madeApart : Effect.promise(() => openAsBlob(built)).pipe(Effect.flatMap(open), Effect.orElse(() => madeApart))
}

/**
 * Marks a folder being filled from the build's archive: until the database has opened there, everything in it but its
 * lock is ours, and a start that finds the mark (the one before was cut off, or the files did not open) fills it again.
 */
const FILLING = "morsel.filling"

/**
 * Everything in a new database's `folder` removed but its lock (and the lock files of processes starting on it, to be
 * refused) and its mark: what a try that failed left.
 */
const empty = (folder: string) => {
  for (const name of readdirSync(folder)) {
    if (!name.startsWith(LOCK_FILE) && name !== FILLING) rmSync(join(folder, name), { recursive: true, force: true })
  }
}

/**
 * A new database in `folder`, made before it opens: the build's archive unpacked there a piece at a time,
 * `PG_VERSION` last, when the folder holds nothing of anyone else's — no initdb, which grows to about 760 MiB, and
 * none of the archive's bytes kept by the server (loaded through PGlite, they left about 45 MiB in it). Else, and
 * without an archive, initdb apart.
 */
const fillFolder = (folder: string) => {
  const mark = join(folder, FILLING)
  const built = builtArchive()
  const ours = Effect.try({
    try: () => existsSync(mark) || readdirSync(folder).every((name) => name.startsWith(LOCK_FILE)),
    catch: (cause) => new DatabaseUnavailable({ message: `cannot read the embedded database folder ${folder}`, cause })
  })
  const unpacked = (archive: string) =>
    Effect.tryPromise({
      try: async () => {
        writeFileSync(mark, "")
        empty(folder)
        const { extract } = await import("tar")
        const isVersion = (path: string) => path.replace(/^\/+/, "") === "PG_VERSION"
        const unpack = (filter: (path: string) => boolean) => extract({ file: archive, cwd: folder, sync: true, preserveOwner: false, filter })
        unpack((path) => !isVersion(path))
        unpack(isVersion)
      },
      catch: (cause) => new DatabaseUnavailable({ message: `cannot create the embedded database in ${folder}: ${String(cause)}`, cause })
    })
  return Effect.flatMap(ours, (isOurs) =>
    built !== undefined && isOurs
      ? unpacked(built)
      : existsSync(join(folder, "PG_VERSION"))
        ? Effect.void
        : initdbApart(folder, undefined)
  )
}

/**
 * Opens the database in `folder`, made there first when it is new (`fillFolder`). Unpacked files that do not open (an
 * archive of another PGlite version: a build older than node_modules) are replaced by initdb's.
 */
const inFolder = <A, E, R>(folder: string, open: Effect.Effect<A, E, R>) => {
  const mark = join(folder, FILLING)
  const remade = Effect.sync(() => empty(folder)).pipe(Effect.zipRight(initdbApart(folder, undefined)), Effect.zipRight(open))
  return fillFolder(folder).pipe(
    Effect.zipRight(Effect.catchAll(open, (error) => (existsSync(mark) ? remade : Effect.fail(error)))),
    Effect.tap(() => Effect.sync(() => rmSync(mark, { force: true })))
  )
}

/**
 * V8 compiles the embedded database's busiest functions a second time with its optimising compiler, which holds
 * about 30 MiB more for the life of the process to run long scans about twice as fast. A serving instance's
 * statements are short and run as fast on the baseline code, so it keeps that code only. It is a setting of the
 * whole process, taken before the database's code is first compiled.
 */
const keepBaselineCodeOnly = () => setFlagsFromString("--liftoff-only")

export interface EmbeddedOptions {
  /** The files of the database to start from (a snapshot of another in-memory database). */
  readonly loadDataDir?: Blob
  /**
   * For a process that serves: the database's code compiled for memory, not for long scans (`morsel fooddb import`),
   * and an in-memory database's files in a scratch folder.
   */
  readonly serving?: boolean
}

/** Where the in-memory databases of serving processes keep their files: a folder each, in the temporary directory. */
const SCRATCH_PREFIX = "morsel-memory-"
/** A scratch folder without a lock older than this was left by a process that died while making it. */
const UNLOCKED_SCRATCH_MS = 60 * 60 * 1000
/** Nothing in a scratch folder outlives its process: PostgreSQL need not wait for its writes to reach the disk. */
const SCRATCH_SETTINGS = [...SETTINGS, "fsync = off", "synchronous_commit = off", "full_page_writes = off"]

/**
 * The in-memory database of a serving process (the sandbox, `MORSEL_DATA_DIR=memory://`) keeps its files in a private
 * folder of the temporary directory, locked as a data folder and removed when the process stops: there they are in
 * the operating system's file cache, where PGlite's in-memory file system would hold them (about 40 MiB, with the
 * garbage of loading them) in the process's own memory for its whole life. The folders of processes that died
 * without removing theirs are removed by the next such start.
 */
const scratchFolder = Effect.acquireRelease(
  Effect.try({
    try: () => {
      const parent = tmpdir()
      for (const name of readdirSync(parent)) {
        const left = join(parent, name)
        try {
          if (name.startsWith(SCRATCH_PREFIX) && isAbandoned(left, UNLOCKED_SCRATCH_MS)) rmSync(left, { recursive: true, force: true })
        } catch {
          // another user's, or gone meanwhile: not this start's to clear
        }
      }
      const folder = mkdtempSync(join(parent, SCRATCH_PREFIX))
      mkdirSync(join(folder, "pgdata"), { mode: 0o700 })
      return folder
    },
    catch: (cause) =>
      new DatabaseUnavailable({ message: `cannot make the in-memory database's folder in the temporary directory (TMPDIR): ${String(cause)}`, cause })
  }),
  (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
).pipe(Effect.tap(lockDataFolder))

/** Starts PGlite on a private unix socket so the ordinary pg driver can talk to it. */
export const embedded = (dataDir: string, options: EmbeddedOptions = {}) => Effect.map(startEmbedded(dataDir, options), (started) => started.target)

/** Like `embedded`, also giving a snapshot of the database files (to clone in-memory databases quickly). */
export const startEmbedded = (dataDir: string, options: EmbeddedOptions = {}) =>
  Effect.gen(function* () {
    const inMemory = dataDir === "memory://"
    if (!inMemory) {
      yield* Effect.tryPromise({
        try: () => mkdir(resolve(dataDir), { recursive: true }),
        catch: (cause) => new DatabaseUnavailable({ message: `cannot create the embedded database folder ${resolve(dataDir)}`, cause })
      })
      // PGlite is single-process: a second writer on the same files can corrupt them.
      yield* lockDataFolder(dataDir)
    }
    const scratch =
      inMemory && options.serving === true && options.loadDataDir === undefined
        ? Option.some(join(yield* scratchFolder, "pgdata"))
        : Option.none()
    const folder = inMemory ? scratch : Option.some(resolve(dataDir))
    if (options.serving === true) keepBaselineCodeOnly()
    // Loaded only here: a server on DATABASE_URL does not hold the embedded database's code.
    const [{ PGlite }, { PGLiteSocketServer }] = yield* Effect.promise(() =>
      Promise.all([import("@electric-sql/pglite"), import("@electric-sql/pglite-socket")])
    )
    const open = (loadDataDir: Blob | undefined) =>
      Effect.acquireRelease(
        Effect.tryPromise({
          try: () =>
            PGlite.create({
              dataDir: Option.getOrUndefined(folder),
              postgresqlconf: Option.isSome(scratch) ? SCRATCH_SETTINGS : SETTINGS,
              ...(loadDataDir ? { loadDataDir } : {})
            }),
          catch: (cause) => new DatabaseUnavailable({ message: `cannot open the embedded database in ${dataDir}`, cause })
        }),
        (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
      )
    const db = yield* options.loadDataDir !== undefined
      ? open(options.loadDataDir)
      : Option.isSome(folder)
        ? inFolder(folder.value, open(undefined))
        : newInMemory(open)
    const socketDir = yield* socketFolder
    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const server = new PGLiteSocketServer({ db, path: join(socketDir, ".s.PGSQL.5432"), maxConnections: 4 })
          await server.start()
          return server
        },
        catch: (cause) => new DatabaseUnavailable({ message: "cannot start the embedded database socket", cause })
      }),
      // Stopping waits for its connections to close: bounded, so that the socket folder is removed after it.
      (server) => Effect.promise(() => server.stop()).pipe(Effect.timeout("2 seconds"), Effect.ignore)
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

/**
 * A server that stops answering (a partitioned network, a stalled server) must not hold requests for ever: a
 * connection, or a free one from a full pool, is waited for this long, then the request answers 503.
 */
const CONNECT_TIMEOUT = "5 seconds"
/**
 * The silence a serving instance bears from a server it sent a statement to before it drops that connection (the
 * statement fails, its transaction dies with the connection); import and migration statements may take longer.
 */
const SERVING_SILENCE_MS = 10_000

/**
 * The client of a target. The embedded database's one connection prepares the statements it repeats: no other
 * process uses that database (its folder is locked), so no other instance changes a table under a prepared statement.
 */
const clientFor = ({ embedded, ...target }: PgTarget, options: { readonly serving?: boolean }) =>
  embedded
    ? PgClient.layerFromPool({
        acquire: Effect.acquireRelease(
          Effect.sync(() =>
            embeddedPool({
              host: target.host ?? "",
              port: target.port ?? 5432,
              database: target.database ?? "postgres",
              user: target.username ?? "postgres",
              max: EMBEDDED_POOL_SIZE
            })
          ),
          (pool) => Effect.promise(() => pool.end())
        )
      })
    : PgClient.layer({
        ...target,
        ...(options.serving && target.url !== undefined
          ? { stream: silenceLimitedSocket(SERVING_SILENCE_MS), connectTimeout: CONNECT_TIMEOUT }
          : {}),
        maxConnections: POOL_SIZE,
        idleTimeout: "60 seconds"
      })

/** A migrated PgClient/SqlClient for an explicit target; `serving` bounds each statement's wait on a real server. */
export const layerFor = (target: PgTarget, options: { readonly serving?: boolean } = {}) =>
  Layer.effectDiscard(migrate).pipe(Layer.provideMerge(clientFor(target, options)))

const chosen = (options: { readonly serving?: boolean }) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const settings = yield* AppConfig
      const target: PgTarget = Option.isSome(settings.databaseUrl)
        ? { url: settings.databaseUrl.value }
        : yield* embedded(settings.dataDir, options)
      return layerFor(target, options)
    })
  )

/** The store chosen by the settings: DATABASE_URL, else PGlite in MORSEL_DATA_DIR. */
export const layer = chosen({})

/**
 * The same for a serving instance: no statement waits on an unanswering database longer than 10 s, and the embedded
 * database keeps the code that serves in the least memory.
 */
export const servingLayer = chosen({ serving: true })

export type Sql = SqlClient.SqlClient
export const Sql = SqlClient.SqlClient
export { Redacted }
