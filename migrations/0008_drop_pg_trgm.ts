/** Drops the trigram extension the first migration installed: spelling repair works on the in-memory food index, not in SQL. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Left in place when another application's objects in the same database use it, or another role owns it.
  yield* sql`
    DO $$
    BEGIN
      DROP EXTENSION IF EXISTS pg_trgm;
    EXCEPTION WHEN dependent_objects_still_exist OR insufficient_privilege THEN
      NULL;
    END
    $$`
})
