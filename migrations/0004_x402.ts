/** x402 payments: one row per request paid with a signed EIP-3009 authorization, from claim to settlement. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // The token contract spends an authorization once per (authorizer, nonce), so that pair is the
  // single-use key here too: a second request carrying the same authorization cannot claim it.
  // raw_transaction / payment_payload hold the signed transfer only while it may still need sending; the payload
  // is kept from the claim on, so a payment nobody submitted yet can still be submitted after a crash.
  // from_block is the chain head before verification: no spend of the authorization can be older.
  // reconciling_until is an instance's lease on the row, so two background reconcilers never work it at once.
  yield* sql`
    CREATE TABLE x402_payments (
      request_id uuid PRIMARY KEY,
      payer text NOT NULL,
      asset text NOT NULL,
      network text NOT NULL,
      pay_to text NOT NULL,
      amount text NOT NULL,
      auth_nonce text NOT NULL,
      authorization_digest text NOT NULL,
      valid_before bigint NOT NULL,
      state text NOT NULL CHECK (state IN ('claimed', 'submitted', 'settled', 'failed')),
      settled_by text CHECK (settled_by IN ('self', 'facilitator')),
      tx_hash text,
      from_block bigint NOT NULL,
      raw_transaction text,
      payment_payload text,
      payment_response text,
      failure_reason text,
      attempts integer NOT NULL DEFAULT 0,
      reconciling_until timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      CHECK (state <> 'settled' OR (tx_hash IS NOT NULL AND payment_response IS NOT NULL)),
      UNIQUE (asset, payer, auth_nonce)
    )`
  yield* sql`CREATE INDEX x402_payments_open ON x402_payments (updated_at) WHERE state IN ('claimed', 'submitted')`
  yield* sql`CREATE INDEX x402_payments_payer ON x402_payments (payer, created_at)`
})
