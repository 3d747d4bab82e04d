/** Whether a key ever paid is one index probe: the credit endpoints ask it on every request of a known key. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX credit_entries_grants_by_key ON credit_entries (fingerprint) WHERE kind = 'grant'`
})
