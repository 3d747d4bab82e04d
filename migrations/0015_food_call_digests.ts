/** The food limit counts addresses as keyed digests: counts written with an address in clear are deleted (a minute's counts at most). */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DELETE FROM food_call_counts WHERE caller !~ '^(address|key):[0-9a-f]{64}$'`
})
