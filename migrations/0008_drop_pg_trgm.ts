/** Drops the trigram extension the first migration installed: spelling repair works on the in-memory food index, not in SQL. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Left in place when it cannot go: another application's objects in the same database use it, another role
  // owns it, or another instance migrating at the same moment drops it first.
  yield* sql`
    DO $$
    BEGIN
      DROP EXTENSION IF EXISTS pg_trgm;
    EXCEPTION WHEN others THEN
      NULL;
    END
    $$`
})
