/** Counts of food search and nutrition calls per client address and per key, one row per minute, shared by every instance. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE IF NOT EXISTS food_call_counts (
      caller text NOT NULL,
      window_start bigint NOT NULL,
      calls integer NOT NULL,
      PRIMARY KEY (caller, window_start)
    )`
})
