import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { CreditFunding } from "../../src/credits/CreditFunding.ts"
import { isRecord, send } from "../support/http.ts"
import { auditLedger, CreditsServer, CreditsServerLive, creditsWithFake, Fake, freshKey } from "./support.ts"
import { bearerCredential, newRequestId, unsaved } from "../support/funding.ts"
import { seededRandom } from "../support/seeded.ts"


const SEED = Number(process.env["MORSEL_TEST_SEED"] ?? "20261121")
const STEPS = 160

interface Buyer {
  readonly key: string
  readonly fingerprint: string
  consumed: number
}

describe("credits: seeded randomized interleavings", () => {
  layer(CreditsServerLive.pipe(Layer.provideMerge(creditsWithFake())), { excludeTestServices: true })("ledger", (it) => {
    it.effect(`purchases, webhooks, confirms, analyses and refunds keep every invariant (seed ${SEED})`, () =>
      Effect.gen(function* () {
        const random = seededRandom(SEED)
        const pick = <A>(items: ReadonlyArray<A>): A | undefined => items[Math.floor(random() * items.length)]
        const fake = yield* Fake
        const funding = yield* CreditFunding
        const sql = yield* SqlClient.SqlClient
        const { url } = yield* CreditsServer
        const call = (path: string, key: string, body: unknown) =>
          Effect.promise(() => send(`${url}${path}`, { headers: { authorization: `Bearer ${key}` }, body }))

        const buyers: Array<Buyer> = []
        for (let i = 0; i < 3; i++) buyers.push({ ...(yield* freshKey), consumed: 0 })
        const sessions: Array<{ readonly buyer: Buyer; readonly sessionId: string }> = []
        const outbox: Array<Parameters<typeof fake.sendWebhook>[1]> = []
        const refunds: Array<string> = []
        const disputes: Array<string> = []
        const log: Array<string> = []

        for (let step = 0; step < STEPS; step++) {
          const buyer = pick(buyers)!
          const roll = random()
          if (roll < 0.15) {
            log.push("checkout")
            const answer = yield* call("/v1/credits/checkout", buyer.key, { order_id: crypto.randomUUID() })
            if (answer.status === 200 && isRecord(answer.body) && typeof answer.body["session_id"] === "string") {
              sessions.push({ buyer, sessionId: answer.body["session_id"] })
            }
          } else if (roll < 0.27) {
            const s = pick(sessions.filter((x) => fake.session(x.sessionId).status === "open"))
            if (s !== undefined) {
              if (random() < 0.7) {
                log.push("pay")
                fake.pay(s.sessionId)
                outbox.push(fake.events.completed(s.sessionId))
              } else {
                log.push("pay async")
                fake.payAsync(s.sessionId)
                outbox.push(fake.events.completed(s.sessionId))
                if (random() < 0.7) {
                  fake.asyncSucceeds(s.sessionId)
                  outbox.push(fake.events.asyncSucceeded(s.sessionId))
                } else {
                  fake.asyncFails(s.sessionId)
                  outbox.push(fake.events.asyncFailed(s.sessionId))
                }
              }
            }
          } else if (roll < 0.45) {
            // Deliver any earlier event again, in any order: duplicates and reordering.
            const event = pick(outbox)
            if (event !== undefined) {
              log.push("webhook")
              const delivery = yield* Effect.promise(() => fake.sendWebhook(`${url}/webhooks/stripe`, event))
              expect(delivery.status).toBe(200)
            }
          } else if (roll < 0.55) {
            const s = pick(sessions)
            if (s !== undefined) {
              log.push("confirm")
              const answer = yield* call("/v1/credits/confirm", random() < 0.8 ? s.buyer.key : buyer.key, { session_id: s.sessionId })
              expect([200, 401, 409]).toContain(answer.status)
            }
          } else if (roll < 0.6) {
            // Refunds and disputes open, succeed, fail or close; their events join the outbox, delivered in any order.
            const s = pick(sessions.filter((x) => fake.session(x.sessionId).payment_status === "paid"))
            const kind = random()
            if (s !== undefined && kind < 0.4) {
              log.push("refund")
              const refundId = fake.refund(s.sessionId, random() < 0.5 ? "succeeded" : "pending")
              refunds.push(refundId)
              outbox.push(fake.events.refundCreated(refundId), fake.events.chargeRefunded(s.sessionId))
            } else if (s !== undefined && kind < 0.6) {
              log.push("refund disputed")
              const disputeId = fake.dispute(s.sessionId)
              disputes.push(disputeId)
              outbox.push(fake.events.disputeCreated(disputeId))
            } else if (kind < 0.8) {
              const refundId = pick(refunds.filter((id) => fake.refunds.get(id)?.status === "pending"))
              if (refundId !== undefined) {
                log.push("refund settles")
                fake.updateRefund(refundId, pick(["succeeded", "failed", "canceled"] as const) ?? "failed")
                outbox.push(fake.events.refundUpdated(refundId))
              }
            } else {
              const disputeId = pick(disputes.filter((id) => fake.disputes.get(id)?.status === "needs_response"))
              if (disputeId !== undefined) {
                log.push("refund dispute closes")
                fake.updateDispute(disputeId, random() < 0.5 ? "won" : "lost")
                outbox.push(fake.events.disputeClosed(disputeId))
              }
            }
          } else {
            const method = yield* Effect.either(funding.identify(bearerCredential(`Bearer ${buyer.key}`)))
            if (Either.isRight(method)) {
              const requestId = newRequestId()
              const reserved = yield* Effect.either(method.right.reserve(requestId))
              if (Either.isRight(reserved)) {
                const outcome = random()
                if (outcome < 0.6) {
                  log.push("analysis ok")
                  yield* reserved.right.settle(unsaved)
                  buyer.consumed++
                } else if (outcome < 0.8) {
                  log.push("analysis failed")
                  yield* reserved.right.release
                } else if (outcome < 0.9) {
                  log.push("analysis timed out")
                  yield* reserved.right.release
                  yield* reserved.right.release
                } else {
                  log.push("analysis abandoned")
                  yield* funding.abandon(requestId)
                }
              } else {
                log.push(`analysis refused ${reserved.left.error.code}`)
              }
            }
          }
          const violations = yield* auditLedger
          expect({ seed: SEED, step, action: log[log.length - 1], violations }).toEqual({
            seed: SEED,
            step,
            action: log[log.length - 1],
            violations: []
          })
        }

        // Every event arrives at least once: then each order is reversed exactly when a refund of it still stands
        // (pending or succeeded) or a dispute of it is open or lost.
        for (const event of outbox) expect((yield* Effect.promise(() => fake.sendWebhook(`${url}/webhooks/stripe`, event))).status).toBe(200)
        const orders = yield* sql<{ session_id: string | null; state: string }>`SELECT session_id, state FROM credit_orders`
        for (const order of orders) {
          const intent = order.session_id === null ? null : fake.session(order.session_id).payment_intent
          const standing =
            intent !== null &&
            ([...fake.refunds.values()].some((r) => r.payment_intent === intent.id && (r.status === "pending" || r.status === "succeeded")) ||
              [...fake.disputes.values()].some((d) => d.payment_intent === intent.id && d.status !== "won"))
          expect({ order, reversed: order.state === "reversed" }).toEqual({ order, reversed: standing })
        }
        expect(yield* auditLedger).toEqual([])

        // Every grant belongs to a session the processor reports paid; the balance is exactly what the events imply.
        const granted = yield* sql<{ order_id: string; session_id: string | null }>`
          SELECT o.order_id, o.session_id FROM credit_orders o JOIN credit_entries e ON e.order_id = o.order_id AND e.kind = 'grant'`
        for (const row of granted) expect(row.session_id !== null && fake.session(row.session_id).payment_status).toBe("paid")
        for (const buyer of buyers) {
          const [counts] = yield* sql<{ grants: number; reversals: number; restorations: number; available: number }>`
            SELECT
              (SELECT count(*)::int FROM credit_entries WHERE fingerprint = ${buyer.fingerprint} AND kind = 'grant') AS grants,
              (SELECT count(*)::int FROM credit_entries WHERE fingerprint = ${buyer.fingerprint} AND kind = 'reversal') AS reversals,
              (SELECT count(*)::int FROM credit_entries WHERE fingerprint = ${buyer.fingerprint} AND kind = 'restoration') AS restorations,
              coalesce((SELECT available FROM credit_accounts WHERE fingerprint = ${buyer.fingerprint}), 0) AS available`
          const packs = (counts?.grants ?? 0) - (counts?.reversals ?? 0) + (counts?.restorations ?? 0)
          expect(counts?.available).toBe(500 * packs - buyer.consumed)
        }
        const kinds = new Set(log.map((l) => l.split(" ")[0]))
        expect([...kinds].sort()).toEqual(expect.arrayContaining(["analysis", "checkout", "confirm", "pay", "refund", "webhook"]))
      }), 120_000)
  })
})
