/**
 * Reversals that can be undone: each refund or dispute of an order is recorded with the furthest status seen,
 * and an order stays reversed only while one of them still takes the money back. A refund that fails or a
 * dispute won by the merchant is answered by a restoration entry (+500) that compensates the reversal.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  // One row per refund or dispute (its processor id). `stage` only grows, so a late or repeated webhook carrying
  // an older status changes nothing; `reverses` says whether this cause keeps its order reversed.
  yield* sql`
    CREATE TABLE credit_reversal_causes (
      cause_id text PRIMARY KEY,
      order_id uuid NOT NULL REFERENCES credit_orders (order_id),
      kind text NOT NULL CHECK (kind IN ('refund', 'dispute', 'legacy')),
      status text NOT NULL,
      stage smallint NOT NULL,
      reverses boolean NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX credit_reversal_causes_by_order ON credit_reversal_causes (order_id) WHERE reverses`

  // Orders reversed before causes were recorded keep a cause of their own: only an operator lifts those.
  yield* sql`
    INSERT INTO credit_reversal_causes (cause_id, order_id, kind, status, stage, reverses, updated_at)
    SELECT 'legacy:' || order_id, order_id, 'legacy', 'reversed', 0, true, updated_at FROM credit_orders WHERE state = 'reversed'`

  // The n-th reversal and the n-th restoration of an order carry cycle n: each happens at most once.
  yield* sql`ALTER TABLE credit_entries ADD COLUMN cycle integer`
  yield* sql`ALTER TABLE credit_entries DISABLE TRIGGER credit_entries_insert_only`
  yield* sql`UPDATE credit_entries SET cycle = 1 WHERE kind = 'reversal'`
  yield* sql`ALTER TABLE credit_entries ENABLE TRIGGER credit_entries_insert_only`

  const checks = yield* sql<{ conname: string }>`
    SELECT conname FROM pg_constraint WHERE conrelid = 'credit_entries'::regclass AND contype = 'c'`
  for (const { conname } of checks) yield* sql.unsafe(`ALTER TABLE credit_entries DROP CONSTRAINT "${conname}"`)
  yield* sql`
    ALTER TABLE credit_entries ADD CONSTRAINT credit_entries_kind_amounts CHECK (
      (kind = 'grant' AND order_id IS NOT NULL AND reservation_id IS NULL AND available_delta = 500 AND reserved_delta = 0 AND cycle IS NULL)
      OR (kind = 'reversal' AND order_id IS NOT NULL AND reservation_id IS NULL AND available_delta = -500 AND reserved_delta = 0 AND cycle >= 1)
      OR (kind = 'restoration' AND order_id IS NOT NULL AND reservation_id IS NULL AND available_delta = 500 AND reserved_delta = 0 AND cycle >= 1)
      OR (kind = 'reserve' AND reservation_id IS NOT NULL AND order_id IS NULL AND available_delta = -1 AND reserved_delta = 1 AND cycle IS NULL)
      OR (kind = 'consume' AND reservation_id IS NOT NULL AND order_id IS NULL AND available_delta = 0 AND reserved_delta = -1 AND cycle IS NULL)
      OR (kind = 'release' AND reservation_id IS NOT NULL AND order_id IS NULL AND available_delta = 1 AND reserved_delta = -1 AND cycle IS NULL)
    )`
  yield* sql`DROP INDEX credit_entries_one_reversal_per_order`
  yield* sql`
    CREATE UNIQUE INDEX credit_entries_one_per_order_cycle ON credit_entries (order_id, kind, cycle)
    WHERE kind IN ('reversal', 'restoration')`
})
