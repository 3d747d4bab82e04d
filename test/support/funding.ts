/** Credentials, request ids and saves for tests that drive one funding rail without the analysis around it. */
import { randomUUID } from "node:crypto"
import { Effect, Ref } from "effect"
import { bearerKey, Credential, PaymentProof, type Save } from "../../src/analysis/Funding.ts"
import { RequestId } from "../../src/domain/ids.ts"

/** The credential of an `Authorization` header value, sent from `client`. */
export const bearerCredential = (authorization: string, client = "127.0.0.1") => Credential.Bearer({ key: bearerKey(authorization), client })

/** The credential of a `PAYMENT-SIGNATURE` header value. */
export const paymentCredential = (paymentSignature: string) => Credential.Payment({ payment: PaymentProof.Encoded({ text: paymentSignature }) })

/** A fresh analysis request id, as the request store would mint it. */
export const newRequestId = () => RequestId.make(randomUUID())

/** A Save that keeps nothing: only the rail is under test. */
export const unsaved: Save = { pending: Effect.void, complete: () => Effect.void, failed: () => Effect.void }

/** A Save that writes down each step it is asked for, in order. */
export const recordingSave = Effect.map(Ref.make<ReadonlyArray<string>>([]), (steps) => {
  const note = (step: string) => Ref.update(steps, (all) => [...all, step])
  const save: Save = { pending: note("pending"), complete: () => note("complete"), failed: (code) => note(`failed:${code}`) }
  return { save, steps: Ref.get(steps) }
})
