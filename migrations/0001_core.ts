/** Extensions and the analysis-request table shared by every instance. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public`
  yield* sql`
    CREATE TABLE analysis_requests (
      request_id uuid PRIMARY KEY,
      payer text NOT NULL,
      idempotency_key text NOT NULL,
      input_fingerprint text NOT NULL,
      status text NOT NULL CHECK (status IN ('running', 'paid', 'failed', 'payment_pending')),
      funding text NOT NULL CHECK (funding IN ('credit', 'x402')),
      attempt integer NOT NULL DEFAULT 1,
      failure_code text,
      result jsonb,
      payment_response jsonb,
      lease_until timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      completed_at timestamptz,
      UNIQUE (payer, idempotency_key)
    )`
  yield* sql`CREATE INDEX analysis_requests_completed_at ON analysis_requests (completed_at) WHERE status = 'paid'`
})
