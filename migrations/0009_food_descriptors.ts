/** Adds the LanguaL descriptors SR28 gives a food (its food source and product type), read by the matcher's search index. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE foods ADD COLUMN IF NOT EXISTS descriptors text`
})
