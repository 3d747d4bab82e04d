/** Adds the nutrients served by food search and nutrition beside the four of an analysis; null where the source lacks one. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const column of ["fiber_g", "sugars_g", "saturated_fat_g", "sodium_mg", "cholesterol_mg", "potassium_mg", "calcium_mg", "iron_mg", "vitamin_c_mg"]) {
    yield* sql.unsafe(`ALTER TABLE foods ADD COLUMN IF NOT EXISTS ${column} double precision CHECK (${column} >= 0)`)
  }
})
