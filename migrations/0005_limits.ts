/** Admission control shared by every instance: admitted analyses (rolling windows, concurrency leases) and credit-endpoint capacity counters. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // One row per analysis the limits let start. The windows count admitted_at; a row holds a concurrency slot
  // until released_at is set or lease_until passes (an instance that crashed mid-analysis frees it that way).
  // An attempt that is forgotten (its payment or credit was refused right after admission) never ran: the
  // cascade removes its admission so it counts toward no window.
  yield* sql`
    CREATE TABLE limit_admissions (
      request_id uuid PRIMARY KEY REFERENCES analysis_requests (request_id) ON DELETE CASCADE,
      payer text NOT NULL,
      funding text NOT NULL CHECK (funding IN ('credit', 'x402')),
      admitted_at timestamptz NOT NULL,
      lease_until timestamptz NOT NULL,
      released_at timestamptz,
      CHECK (lease_until > admitted_at)
    )`
  yield* sql`CREATE INDEX limit_admissions_admitted ON limit_admissions (admitted_at)`
  yield* sql`CREATE INDEX limit_admissions_payer ON limit_admissions (payer, admitted_at)`
  yield* sql`CREATE INDEX limit_admissions_running ON limit_admissions (lease_until) WHERE released_at IS NULL`
  // Taken FOR UPDATE by every admission: check-then-insert is one critical section across all instances.
  yield* sql`CREATE TABLE limit_locks (name text PRIMARY KEY)`
  yield* sql`INSERT INTO limit_locks (name) VALUES ('analyses') ON CONFLICT (name) DO NOTHING`
  // One statement per admission: lock, count, decide and insert commit together, with no client-held
  // transaction (embedded PGlite serves one statement at a time safely, not interleaved transactions).
  // VOLATILE, so each query below takes a fresh snapshot and sees every admission committed before the lock.
  // Returns NULL when admitted (or, with p_admit false, when it would be), else the name of the limit reached.
  yield* sql.unsafe(`
    CREATE FUNCTION limit_admission(
      p_request_id uuid, p_payer text, p_funding text, p_admit boolean,
      p_now timestamptz, p_hour_ago timestamptz, p_day_ago timestamptz, p_lease_until timestamptz,
      p_global_per_day integer, p_global_per_hour integer, p_payer_per_day integer, p_concurrent integer,
      p_x402_per_day integer, p_x402_per_hour integer, p_x402_concurrent integer, p_failures_per_day integer
    ) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      u record;
      failures integer;
    BEGIN
      IF p_admit THEN
        PERFORM 1 FROM limit_locks WHERE name = 'analyses' FOR UPDATE;
      END IF;
      SELECT
        count(*) FILTER (WHERE admitted_at > p_day_ago) AS global_day,
        count(*) FILTER (WHERE admitted_at > p_hour_ago) AS global_hour,
        count(*) FILTER (WHERE released_at IS NULL AND lease_until > p_now) AS running,
        count(*) FILTER (WHERE funding = 'x402' AND admitted_at > p_day_ago) AS x402_day,
        count(*) FILTER (WHERE funding = 'x402' AND admitted_at > p_hour_ago) AS x402_hour,
        count(*) FILTER (WHERE funding = 'x402' AND released_at IS NULL AND lease_until > p_now) AS x402_running,
        count(*) FILTER (WHERE payer = p_payer AND admitted_at > p_day_ago) AS payer_day
      INTO u
      FROM limit_admissions
      WHERE admitted_at > p_day_ago OR (released_at IS NULL AND lease_until > p_now);
      IF p_payer IS NOT NULL THEN
        -- counts_as_failure already leaves provider refusals and the service's own outages out.
        SELECT count(*) INTO failures FROM analysis_requests
        WHERE payer = p_payer AND status = 'failed' AND counts_as_failure AND completed_at > p_day_ago;
        IF failures >= p_failures_per_day THEN RETURN 'failures'; END IF;
        IF u.payer_day >= p_payer_per_day THEN RETURN 'payer_day'; END IF;
      END IF;
      IF u.running >= p_concurrent THEN RETURN 'concurrent'; END IF;
      IF u.global_hour >= p_global_per_hour THEN RETURN 'global_hour'; END IF;
      IF u.global_day >= p_global_per_day THEN RETURN 'global_day'; END IF;
      IF p_funding = 'x402' THEN
        IF u.x402_running >= p_x402_concurrent THEN RETURN 'x402_concurrent'; END IF;
        IF u.x402_hour >= p_x402_per_hour THEN RETURN 'x402_hour'; END IF;
        IF u.x402_day >= p_x402_per_day THEN RETURN 'x402_day'; END IF;
      END IF;
      IF p_admit THEN
        INSERT INTO limit_admissions (request_id, payer, funding, admitted_at, lease_until)
        VALUES (p_request_id, p_payer, p_funding, p_now, p_lease_until)
        ON CONFLICT (request_id) DO NOTHING;
        -- Rows that fell out of every window and hold no slot are history nobody reads.
        DELETE FROM limit_admissions
        WHERE admitted_at <= p_day_ago AND (released_at IS NOT NULL OR lease_until <= p_now);
      END IF;
      RETURN NULL;
    END
    $$`)
  // Fixed one-minute request counters of the credit endpoints, per key digest and for the whole service.
  yield* sql`
    CREATE TABLE capacity_counters (
      scope text NOT NULL,
      window_start timestamptz NOT NULL,
      requests integer NOT NULL CHECK (requests > 0),
      PRIMARY KEY (scope, window_start)
    )`
  yield* sql`CREATE INDEX capacity_counters_window ON capacity_counters (window_start)`
})
