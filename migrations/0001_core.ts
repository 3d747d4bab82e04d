/** The analysis requests shared by every instance. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // One row per attempt. A failed attempt stays (feedback, failure limits) and frees its Idempotency-Key
  // for a retry; at most one live attempt (running, paid or payment_pending) exists per payer and key.
  yield* sql`
    CREATE TABLE analysis_requests (
      request_id uuid PRIMARY KEY,
      payer text NOT NULL,
      idempotency_key text NOT NULL,
      input_fingerprint text NOT NULL,
      funding text NOT NULL CHECK (funding IN ('credit', 'x402')),
      status text NOT NULL CHECK (status IN ('running', 'paid', 'failed', 'payment_pending')),
      failure_code text,
      counts_as_failure boolean NOT NULL DEFAULT false,
      result jsonb,
      payment_response text,
      lease_until timestamptz NOT NULL,
      created_at timestamptz NOT NULL,
      completed_at timestamptz,
      CHECK (status <> 'paid' OR completed_at IS NOT NULL)
    )`
  yield* sql`
    CREATE UNIQUE INDEX analysis_requests_live_key ON analysis_requests (payer, idempotency_key)
    WHERE status <> 'failed'`
  yield* sql`CREATE INDEX analysis_requests_payer_key ON analysis_requests (payer, idempotency_key, created_at DESC)`
  yield* sql`CREATE INDEX analysis_requests_stored_results ON analysis_requests (completed_at) WHERE result IS NOT NULL AND status = 'paid'`
  yield* sql`CREATE INDEX analysis_requests_payer_created ON analysis_requests (payer, created_at)`
})
