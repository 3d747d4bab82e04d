import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { embedded, layerFor } from "../../src/db/Database.ts"

/** A migrated embedded database in `dataDir` for the length of `use`, as a server start opens it. */
const withDatabase = <A, E>(dataDir: string, use: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(layerFor(yield* embedded(dataDir)))
      return yield* Effect.provide(use, context)
    })
  )

describe("embedded database", () => {
  it.effect("a first start creates the folder's database, and a restart finds what it stored", () =>
    Effect.gen(function* () {
      const parent = mkdtempSync(join(tmpdir(), "morsel-embedded-"))
      const dataDir = join(parent, "data")
      try {
        yield* withDatabase(
          dataDir,
          Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE kept (note text); INSERT INTO kept VALUES ('first start')`)
        )
        expect(existsSync(join(dataDir, "PG_VERSION"))).toBe(true)
        const rows = yield* withDatabase(
          dataDir,
          Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ note: string }>`SELECT note FROM kept`)
        )
        expect(rows).toEqual([{ note: "first start" }])
      } finally {
        rmSync(parent, { recursive: true, force: true })
      }
    }), 120_000)

  it.effect("a first start cut off while it filled its folder is filled again at the next start, and what it left is gone", () =>
    Effect.gen(function* () {
      const parent = mkdtempSync(join(tmpdir(), "morsel-embedded-"))
      const dataDir = join(parent, "data")
      try {
        mkdirSync(dataDir)
        // Cut off after PG_VERSION was written: the folder's mark says it was still being filled.
        writeFileSync(join(dataDir, "morsel.filling"), "")
        writeFileSync(join(dataDir, "PG_VERSION"), "18\n")
        writeFileSync(join(dataDir, "half-written"), "x")
        const rows = yield* withDatabase(
          dataDir,
          Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ requests: number }>`SELECT count(*)::int AS requests FROM analysis_requests`)
        )
        expect(rows).toEqual([{ requests: 0 }])
        expect(readdirSync(dataDir)).not.toContain("half-written")
        expect(readdirSync(dataDir)).not.toContain("morsel.filling")
      } finally {
        rmSync(parent, { recursive: true, force: true })
      }
    }), 120_000)

  it.effect("a folder holding files of its own keeps them: its database is made beside them", () =>
    Effect.gen(function* () {
      const dataDir = mkdtempSync(join(tmpdir(), "morsel-embedded-"))
      try {
        writeFileSync(join(dataDir, "notes.txt"), "mine")
        yield* withDatabase(dataDir, Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`))
        expect(readFileSync(join(dataDir, "notes.txt"), "utf8")).toBe("mine")
        expect(existsSync(join(dataDir, "PG_VERSION"))).toBe(true)
      } finally {
        rmSync(dataDir, { recursive: true, force: true })
      }
    }), 120_000)

  it.effect("a parameterised statement run a second time is prepared once, and its answers stay the same", () =>
    withDatabase(
      "memory://",
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const prepared = Effect.map(
          sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE '%AS doubled%'`,
          (rows) => rows[0]!.n
        )
        const doubled = (x: number) => Effect.map(sql<{ doubled: number }>`SELECT ${x}::int * 2 AS doubled`, (rows) => rows[0]!.doubled)
        expect(yield* doubled(1)).toBe(2)
        expect(yield* prepared).toBe(0)
        expect(yield* doubled(2)).toBe(4)
        expect(yield* prepared).toBe(1)
        for (let x = 3; x < 10; x++) expect(yield* doubled(x)).toBe(2 * x)
        expect(yield* prepared).toBe(1)
      })
    ))

  it.effect("an in-memory database starts empty and migrated", () =>
    withDatabase(
      "memory://",
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ requests: number }>`SELECT count(*)::int AS requests FROM analysis_requests`
        expect(row?.requests).toBe(0)
      })
    ), 120_000)

  it.effect("a folder that cannot be created is a clear failure naming it", () =>
    Effect.gen(function* () {
      const parent = mkdtempSync(join(tmpdir(), "morsel-embedded-"))
      const file = join(parent, "a-file")
      writeFileSync(file, "not a folder")
      try {
        const error = yield* Effect.flip(Effect.scoped(embedded(join(file, "data"))))
        expect(error.message).toContain(join(file, "data"))
      } finally {
        rmSync(parent, { recursive: true, force: true })
      }
    }))
})
