/** Card-credit tables: key accounts, the insert-only ledger, reservations, checkout orders and feedback. */
import { randomBytes } from "node:crypto"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  // Per-database HMAC secret for key fingerprints, drawn once from Node's CSPRNG (no pgcrypto needed).
  yield* sql`CREATE TABLE credit_secrets (name text PRIMARY KEY, secret bytea NOT NULL)`
  yield* sql`
    INSERT INTO credit_secrets (name, secret)
    VALUES ('key_fingerprint', decode(${randomBytes(32).toString("hex")}, 'hex'))
    ON CONFLICT (name) DO NOTHING`

  // One balance row per key; available/reserved always equal the sums of the key's ledger entries.
  yield* sql`
    CREATE TABLE credit_accounts (
      fingerprint text PRIMARY KEY CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
      available integer NOT NULL DEFAULT 0,
      reserved integer NOT NULL DEFAULT 0 CHECK (reserved >= 0),
      blocked boolean NOT NULL DEFAULT false,
      blocked_reason text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`

  yield* sql`
    CREATE TABLE credit_orders (
      order_id uuid PRIMARY KEY,
      fingerprint text NOT NULL REFERENCES credit_accounts (fingerprint),
      state text NOT NULL CHECK (state IN ('pending', 'paid', 'expired', 'not_issued', 'reversed')),
      session_id text UNIQUE,
      checkout_url text,
      payment_intent_id text,
      session_params jsonb NOT NULL,
      context jsonb,
      created_at timestamptz NOT NULL,
      last_attempt_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  // A key has at most one unfinished order: a new explicit order waits for paid, expired or not_issued.
  yield* sql`CREATE UNIQUE INDEX credit_orders_one_pending_per_key ON credit_orders (fingerprint) WHERE state = 'pending'`
  yield* sql`CREATE INDEX credit_orders_payment_intent ON credit_orders (payment_intent_id) WHERE payment_intent_id IS NOT NULL`

  yield* sql`
    CREATE TABLE credit_reservations (
      reservation_id uuid PRIMARY KEY,
      request_id uuid NOT NULL,
      fingerprint text NOT NULL REFERENCES credit_accounts (fingerprint),
      state text NOT NULL CHECK (state IN ('held', 'consumed', 'released')),
      created_at timestamptz NOT NULL,
      settled_at timestamptz
    )`
  // An analysis has at most one live-or-consumed reservation; a released one lets a retried attempt reserve again.
  yield* sql`
    CREATE UNIQUE INDEX credit_reservations_one_per_request ON credit_reservations (request_id)
    WHERE state IN ('held', 'consumed')`

  yield* sql`
    CREATE TABLE credit_entries (
      entry_id bigserial PRIMARY KEY,
      fingerprint text NOT NULL REFERENCES credit_accounts (fingerprint),
      kind text NOT NULL CHECK (kind IN ('grant', 'reversal', 'reserve', 'consume', 'release')),
      order_id uuid REFERENCES credit_orders (order_id),
      reservation_id uuid REFERENCES credit_reservations (reservation_id),
      available_delta integer NOT NULL,
      reserved_delta integer NOT NULL,
      created_at timestamptz NOT NULL,
      CHECK (
        (kind = 'grant' AND order_id IS NOT NULL AND reservation_id IS NULL AND available_delta = 500 AND reserved_delta = 0)
        OR (kind = 'reversal' AND order_id IS NOT NULL AND reservation_id IS NULL AND available_delta = -500 AND reserved_delta = 0)
        OR (kind = 'reserve' AND reservation_id IS NOT NULL AND order_id IS NULL AND available_delta = -1 AND reserved_delta = 1)
        OR (kind = 'consume' AND reservation_id IS NOT NULL AND order_id IS NULL AND available_delta = 0 AND reserved_delta = -1)
        OR (kind = 'release' AND reservation_id IS NOT NULL AND order_id IS NULL AND available_delta = 1 AND reserved_delta = -1)
      )
    )`
  yield* sql`CREATE UNIQUE INDEX credit_entries_one_grant_per_order ON credit_entries (order_id) WHERE kind = 'grant'`
  yield* sql`CREATE UNIQUE INDEX credit_entries_one_reversal_per_order ON credit_entries (order_id) WHERE kind = 'reversal'`
  yield* sql`CREATE UNIQUE INDEX credit_entries_one_reserve_per_reservation ON credit_entries (reservation_id) WHERE kind = 'reserve'`
  yield* sql`
    CREATE UNIQUE INDEX credit_entries_one_settlement_per_reservation ON credit_entries (reservation_id)
    WHERE kind IN ('consume', 'release')`
  yield* sql`CREATE INDEX credit_entries_by_key ON credit_entries (fingerprint)`
  // Entries are history: they are only ever inserted.
  yield* sql`
    CREATE FUNCTION credit_entries_insert_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'credit_entries is insert-only';
    END
    $$`
  yield* sql`
    CREATE TRIGGER credit_entries_insert_only BEFORE UPDATE OR DELETE ON credit_entries
    FOR EACH ROW EXECUTE FUNCTION credit_entries_insert_only()`

  yield* sql`
    CREATE TABLE credit_feedback (
      request_id uuid PRIMARY KEY,
      fingerprint text NOT NULL REFERENCES credit_accounts (fingerprint),
      category text NOT NULL,
      note text NOT NULL CHECK (char_length(note) <= 500),
      created_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX credit_feedback_by_key ON credit_feedback (fingerprint, created_at)`
  yield* sql`CREATE INDEX credit_feedback_by_time ON credit_feedback (created_at)`
})
