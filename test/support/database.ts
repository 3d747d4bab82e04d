/** A fresh, migrated database per test file: in-memory PGlite, or a new schema on TEST_DATABASE_URL. */
import { randomBytes } from "node:crypto"
import { openAsBlob } from "node:fs"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Reactivity } from "@effect/experimental"
import { Effect, Layer, Redacted } from "effect"
import { embedded, layerFor, startEmbedded } from "../../src/db/Database.ts"

export const realPostgresUrl = process.env["TEST_DATABASE_URL"]

/** Admin connection to the real server, used to create and drop the per-file schema. */
const withAdmin = <A, E>(f: (sql: PgClient.PgClient) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.flatMap(PgClient.make({ url: Redacted.make(realPostgresUrl ?? ""), maxConnections: 1 }), f)).pipe(
    Effect.provide(Reactivity.layer),
    Effect.orDie
  )

const freshSchema = Effect.acquireRelease(
  Effect.gen(function* () {
    const schema = `t_${randomBytes(6).toString("hex")}`
    yield* withAdmin((sql) => sql.unsafe(`CREATE SCHEMA ${schema}`))
    return schema
  }),
  (schema) => withAdmin((sql) => sql.unsafe(`DROP SCHEMA ${schema} CASCADE`)).pipe(Effect.ignore)
)

const withSearchPath = (url: string, schema: string) => {
  const u = new URL(url)
  // Only the test's own schema: tables anything else left in `public` must never stand in for the test's.
  u.searchParams.set("options", `-c search_path=${schema}`)
  return u.toString()
}

/** Where the suite's global set-up (test/support/template.ts) left the migrated template for every test process. */
export const TEMPLATE_FILE = "MORSEL_TEST_TEMPLATE"

/**
 * A migrated, empty in-memory database's files: the build's archive holds the shipped foods, and a test starts from an
 * empty database, as on a PostgreSQL server. Made once (about 3 s) and cloned for each test (about 0.5 s).
 */
export const makeTemplate = Effect.scoped(
  Effect.gen(function* () {
    const started = yield* startEmbedded("memory://")
    const context = yield* Layer.build(layerFor(started.target))
    yield* Effect.provide(
      Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.andThen(sql`TRUNCATE foods, food_portions, food_imports`, sql`VACUUM FULL`)),
      context
    )
    return yield* started.snapshot
  })
).pipe(Effect.orDie)

let template: Promise<Blob> | undefined
const migratedTemplate = Effect.promise(() => {
  const file = process.env[TEMPLATE_FILE]
  template ??= file !== undefined ? openAsBlob(file) : Effect.runPromise(makeTemplate)
  return template
})

/** Real PostgreSQL (fresh schema) when TEST_DATABASE_URL is set, otherwise in-memory PGlite. */
export const TestDatabase = Layer.unwrapScoped(
  Effect.gen(function* () {
    if (realPostgresUrl) {
      const schema = yield* freshSchema
      return layerFor({ url: Redacted.make(withSearchPath(realPostgresUrl, schema)) })
    }
    return layerFor(yield* embedded("memory://", { loadDataDir: yield* migratedTemplate }))
  })
)

/** Runs one query on `url` through a short-lived client of its own (plain SQL, for checks made beside the service). */
export const query = <Row extends object>(url: string, text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(PgClient.make({ url: Redacted.make(url), maxConnections: 1 }), (sql) => sql.unsafe<Row>(text, params))
    ).pipe(Effect.provide(Reactivity.layer))
  )

/** For tests that only mean something on a real server (true concurrency across connections). */
export const describeRealPostgres = realPostgresUrl ? "real PostgreSQL" : undefined

/**
 * One fresh database for several simulated service instances: on real PostgreSQL each `instance()` is its own
 * connection pool, as separate processes would have; in-memory PGlite has one backend, so there they share one.
 */
export const sharedTestDatabase = Effect.gen(function* () {
  if (realPostgresUrl) {
    const url = Redacted.make(withSearchPath(realPostgresUrl, yield* freshSchema))
    return { instance: () => layerFor({ url }).pipe(Layer.orDie) }
  }
  const context = yield* Layer.build(TestDatabase.pipe(Layer.orDie))
  return { instance: () => Layer.succeedContext(context) }
})
