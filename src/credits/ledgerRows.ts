/** The rows the ledger reads back from the credit tables, each decoded with the schema of its columns. */
import { Schema } from "effect"
import { rowsOf } from "../db/rows.ts"
import { KeyFingerprint } from "../domain/ids.ts"

/** A key's balance row. */
export const Account = Schema.Struct({
  fingerprint: KeyFingerprint,
  available: Schema.Number,
  reserved: Schema.Number,
  blocked: Schema.Boolean
})
export type Account = typeof Account.Type

/** A reservation as callers see it (its columns renamed by the query that reads it). */
export const HeldReservation = Schema.Struct({
  reservationId: Schema.String,
  requestId: Schema.String,
  fingerprint: KeyFingerprint,
  state: Schema.Literal("held", "consumed", "released")
})
export type HeldReservation = typeof HeldReservation.Type

export const accounts = rowsOf(Account)
export const reservations = rowsOf(HeldReservation)

/** The keys of the rows a statement touched, or the state it found. */
export const entryIds = rowsOf(Schema.Struct({ entry_id: Schema.String }))
export const states = rowsOf(Schema.Struct({ state: Schema.String }))
export const kinds = rowsOf(Schema.Struct({ kind: Schema.String }))
export const fingerprints = rowsOf(Schema.Struct({ fingerprint: KeyFingerprint }))
export const reservationIds = rowsOf(Schema.Struct({ reservation_id: Schema.String }))
