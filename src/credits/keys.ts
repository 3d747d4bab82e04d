/** Credit API keys: format and mode checks, the keyed fingerprint the server stores instead of a key. */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { rowsOf } from "../db/rows.ts"
import { KeyFingerprint, PayerId } from "../domain/ids.ts"

/** `morsel_live_` in live mode, `morsel_test_` in test mode; never both on one server. */
export const keyPrefix = (testMode: boolean) => (testMode ? "morsel_test_" : "morsel_live_")

const KEY_BODY = /^[0-9a-f]{64}$/

/** The key if it has this server's mode prefix and 64 lowercase hex characters; anything else is None. */
export const parseCreditKey = (raw: string, testMode: boolean): Option.Option<string> => {
  const prefix = keyPrefix(testMode)
  return raw.length === prefix.length + 64 && raw.startsWith(prefix) && KEY_BODY.test(raw.slice(prefix.length))
    ? Option.some(raw)
    : Option.none()
}

/** A fresh client-side key (32 random bytes), as `morsel key new` prints it. */
export const newCreditKey = (testMode: boolean): string => keyPrefix(testMode) + randomBytes(32).toString("hex")

/** The payer identifier of a credit key in analysis requests and limits: `key:<fingerprint>`. */
export const payerIdOf = (fingerprint: string): PayerId => PayerId.make(`key:${fingerprint}`)

/** Constant-time equality of two fingerprints (or any two hex strings). */
export const sameFingerprint = (a: string, b: string): boolean => {
  const left = Buffer.from(a, "utf8")
  const right = Buffer.from(b, "utf8")
  return left.length === right.length && timingSafeEqual(left, right)
}

/** Name of the per-database HMAC secret row that migration 0003 creates from Node's CSPRNG. */
export const FINGERPRINT_SECRET = "key_fingerprint"

const secrets = rowsOf(Schema.Struct({ secret: Schema.Uint8ArrayFromSelf }))

/**
 * Computes `HMAC-SHA-256(secret, key)` as hex. The secret is a per-database random row, so a copy of the
 * fingerprints alone cannot be matched against keys seen elsewhere.
 */
export class KeyFingerprints extends Context.Tag("morsel/credits/KeyFingerprints")<
  KeyFingerprints,
  {
    readonly testMode: boolean
    /** The fingerprint of a well-formed key of this server's mode; None for anything else. */
    readonly fingerprint: (key: Redacted.Redacted<string>) => Option.Option<KeyFingerprint>
    /** The same keyed digest of another identifier the service counts by (a client address), never stored in clear. */
    readonly digest: (identifier: string) => string
  }
>() {}

export const KeyFingerprintsLive = Layer.effect(
  KeyFingerprints,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const [row] = yield* secrets(sql`SELECT secret FROM credit_secrets WHERE name = ${FINGERPRINT_SECRET}`)
    if (row === undefined) return yield* Effect.dieMessage("credit_secrets has no key_fingerprint row; run the migrations")
    const secret = Buffer.from(row.secret)
    const hmac = (text: string) => createHmac("sha256", secret).update(text, "utf8").digest("hex")
    const fingerprintOf = (key: string) => KeyFingerprint.make(hmac(key))
    return KeyFingerprints.of({
      testMode: config.testMode,
      fingerprint: (key) => Option.map(parseCreditKey(Redacted.value(key), config.testMode), fingerprintOf),
      digest: hmac
    })
  })
)
