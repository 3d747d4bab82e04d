/** Self-settlement nonces shared by every instance that settles with one wallet: its lease, and the nonce of each transaction it signed. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // One row per settler address. An instance holds it (held_by, held_until) while it picks a nonce, signs,
  // records and broadcasts, so two instances never sign the same nonce. A lease, not a transaction: nothing
  // stays open across the chain calls, and a vanished holder frees it when held_until passes.
  yield* sql`
    CREATE TABLE x402_settlers (
      address text PRIMARY KEY,
      held_by text,
      held_until timestamptz
    )`
  // The transaction each nonce of a settler was last signed for (a payment, a replacement or a gap filler),
  // recorded before broadcast: a recorded nonce the chain neither mined nor holds is a gap to fill. Rows below
  // the chain's mined count are pruned.
  yield* sql`
    CREATE TABLE x402_settler_transactions (
      address text NOT NULL REFERENCES x402_settlers (address),
      nonce bigint NOT NULL,
      tx_hash text NOT NULL,
      request_id uuid,
      signed_at timestamptz NOT NULL,
      PRIMARY KEY (address, nonce)
    )`
  // The reconciler looks for payments whose request still waits on them.
  yield* sql`CREATE INDEX analysis_requests_payment_pending ON analysis_requests (request_id) WHERE status = 'payment_pending'`
})
