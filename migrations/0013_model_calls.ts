/** What each analysis's vision model call used: tokens as the provider reported them, its time, and its cost at the prices set then. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // One row per analysis whose model call came back (an unusable answer is paid for too). A count the provider did
  // not report stays NULL; cost_usd is NULL when no prices were set, never a guess.
  yield* sql`
    CREATE TABLE model_calls (
      request_id uuid PRIMARY KEY REFERENCES analysis_requests (request_id) ON DELETE CASCADE,
      prompt_tokens integer,
      completion_tokens integer,
      reasoning_tokens integer,
      cached_tokens integer,
      seconds double precision NOT NULL,
      output text NOT NULL CHECK (output IN ('json_schema', 'json_object', 'text')),
      cost_usd double precision,
      created_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX model_calls_created ON model_calls (created_at)`
})
