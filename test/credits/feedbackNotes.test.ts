// A feedback note that carries a key, a secret or personal data is refused in words, and nothing of it is stored.
import { randomBytes } from "node:crypto"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { newCreditKey, payerIdOf } from "../../src/credits/keys.ts"
import { errorCode, isRecord, send } from "../support/http.ts"
import { buyer, CreditsServer, CreditsServerLive, creditsWithFake, Fake, seedAnalysisRequest } from "./support.ts"

/**
 * Random hex for the secrets below, drawn again when it holds ten digits in a row: a phone number may be read in
 * those (a 0 and nine more), and the answer would then rightly name one more thing than the case expects.
 */
const hex = (bytes: number): string => {
  const drawn = randomBytes(bytes).toString("hex")
  return /\d{10}/.test(drawn) ? hex(bytes) : drawn
}

/** Notes a person might paste, and the words the answer must name. */
const sensitive: ReadonlyArray<readonly [string, string]> = [
  [`my key is ${newCreditKey(false)} please check`, "a credit key"],
  [`tried with ${newCreditKey(true).toUpperCase()}`, "a credit key"],
  [`server uses sk_live_${hex(12)}`, "a Stripe secret key"],
  [`sk_test_${hex(12)} and whsec_${hex(16)}`, "a Stripe secret key and a Stripe webhook secret"],
  [`wallet 0x${hex(32)}`, "a private key"],
  ["write to jane.doe+food@example.co.uk", "an e-mail address"],
  ["call me on +370 612 34567", "a phone number"],
  ["or (555) 123-4567", "a phone number"],
  ["mobile 0612345678", "a phone number"]
]

/** Notes that hold numbers, dates and ids, and nothing sensitive. */
const ordinary = [
  "rice was 200 g, chicken about 150 g",
  "weighed 340.5 g at 2026-11-25 12:30; 569.9 kcal looks high",
  "request 3f2a1c9e-1b2d-4e5f-8a9b-0c1d2e3f4a5b was slow (12000 ms)",
  "1 cup = 240 ml, 2 tbsp oil, 4 x 25 g",
  "tx 0x12ab failed once"
]

const serverWithFake = CreditsServerLive.pipe(Layer.provideMerge(creditsWithFake()))

describe("feedback notes", () => {
  layer(serverWithFake, { excludeTestServices: true })("with the fake processor", (it) => {
    it.effect("a note holding a key, secret, e-mail or phone number: 400 naming it, not stored; ordinary notes are kept", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const sql = yield* SqlClient.SqlClient
        const { url } = yield* CreditsServer
        const { key, fingerprint, sessionId } = yield* buyer
        fake.pay(sessionId)
        const submit = (request_id: string, note: string) =>
          Effect.promise(() =>
            send(`${url}/v1/credits/feedback`, { headers: { authorization: `Bearer ${key}` }, body: { request_id, category: "other", note } })
          )

        for (const [note, named] of sensitive) {
          const requestId = yield* seedAnalysisRequest({ payer: payerIdOf(fingerprint), status: "paid", createdAt: new Date() })
          const refused = yield* submit(requestId, note)
          expect([note, refused.status, errorCode(refused)]).toEqual([note, 400, "invalid_request"])
          const message = isRecord(refused.body) && isRecord(refused.body["error"]) ? String(refused.body["error"]["message"]) : ""
          expect(message).toContain(named)
          // Nothing of the note comes back: no secret-looking run of the note is in the answer.
          for (const word of note.split(/\s+/).filter((w) => /\d{4}|_/.test(w))) expect(refused.text).not.toContain(word)
          const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM credit_feedback WHERE request_id = ${requestId}`
          expect(row?.n).toBe(0)
          // The same request takes a clean note afterwards: the refused one was not kept.
          const clean = yield* submit(requestId, "portion looked right")
          expect(clean.body).toMatchObject({ recorded: true, duplicate: false })
        }
        const notes = yield* sql<{ note: string }>`SELECT note FROM credit_feedback WHERE fingerprint = ${fingerprint}`
        expect(notes.map((r) => r.note)).toEqual(Array(sensitive.length).fill("portion looked right"))
      }), 60_000)

    it.effect("notes with grams, dates, ids and short hex are accepted as written", () =>
      Effect.gen(function* () {
        const fake = yield* Fake
        const sql = yield* SqlClient.SqlClient
        const { url } = yield* CreditsServer
        const { key, fingerprint, sessionId } = yield* buyer
        fake.pay(sessionId)
        for (const note of ordinary) {
          const requestId = yield* seedAnalysisRequest({ payer: payerIdOf(fingerprint), status: "failed", createdAt: new Date() })
          const answer = yield* Effect.promise(() =>
            send(`${url}/v1/credits/feedback`, {
              headers: { authorization: `Bearer ${key}` },
              body: { request_id: requestId, category: "wrong_portion", note }
            })
          )
          expect([note, answer.status]).toEqual([note, 200])
          const [row] = yield* sql<{ note: string }>`SELECT note FROM credit_feedback WHERE request_id = ${requestId}`
          expect(row?.note).toBe(note)
        }
      }))
  })
})
