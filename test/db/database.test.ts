import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { migrate } from "../../src/db/migrations.ts"
import { TestDatabase } from "../support/database.ts"

describe("database", () => {
  it.layer(TestDatabase)("migrations", (it) => {
    it.effect("creates the schema and is idempotent when applied again", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const again = yield* migrate
        expect(again).toEqual([])
        const tables = yield* sql<{ table_name: string }>`
          SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`
        expect(tables.map((t) => t.table_name)).toContain("analysis_requests")
        // No extension beyond the built-in procedural language: the embedded database loads none.
        const extensions = yield* sql<{ extname: string }>`SELECT extname FROM pg_extension ORDER BY extname`
        expect(extensions.map((e) => e.extname)).not.toContain("pg_trgm")
      }))
  })
})
