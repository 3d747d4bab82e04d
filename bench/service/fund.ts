/**
 * Funds a new credit key in the database the environment names, as a paid card checkout would: the key's account and
 * pending orders are stored, and each order's pack is granted by the ledger (the one call the Stripe webhook's
 * fulfilment makes). Run by the service benchmark with the server's environment while that server is stopped (the
 * embedded database opens in one process at a time); prints the key on one line.
 */
import { randomUUID } from "node:crypto"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option, Redacted } from "effect"
import { AppConfigLive } from "../../src/config.ts"
import { Ledger, LedgerLive } from "../../src/credits/Ledger.ts"
import { KeyFingerprints, KeyFingerprintsLive, newCreditKey } from "../../src/credits/keys.ts"
import * as Database from "../../src/db/Database.ts"
import { OrderId } from "../../src/domain/ids.ts"

const packs = Number(process.argv[2] ?? "4")

const fund = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const keys = yield* KeyFingerprints
  const ledger = yield* Ledger
  const key = newCreditKey(keys.testMode)
  const fingerprint = Option.getOrThrow(keys.fingerprint(Redacted.make(key)))
  for (let pack = 0; pack < packs; pack++) {
    const orderId = OrderId.make(randomUUID())
    const at = new Date()
    yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* ledger.openAccount(fingerprint)
        yield* sql`
          INSERT INTO credit_orders (order_id, fingerprint, state, session_params, created_at, last_attempt_at, updated_at)
          VALUES (${orderId}, ${fingerprint}, 'pending', '{}'::jsonb, ${at}, ${at}, ${at})`
      })
    )
    if (!(yield* ledger.grant(orderId, fingerprint))) throw new Error("the ledger granted no pack")
  }
  const account = Option.getOrThrow(yield* ledger.account(fingerprint))
  process.stdout.write(`KEY ${key} ${account.available}\n`)
})

await Effect.runPromise(
  fund.pipe(Effect.provide(Layer.mergeAll(LedgerLive, KeyFingerprintsLive).pipe(Layer.provideMerge(Database.layer), Layer.provideMerge(AppConfigLive))))
)
