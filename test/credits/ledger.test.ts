import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { Ledger } from "../../src/credits/Ledger.ts"
import { disputeCause, refundCause } from "../../src/credits/webhooks.ts"
import type { KeyFingerprint } from "../../src/domain/ids.ts"
import { realPostgresUrl } from "../support/database.ts"
import { auditLedger, creditsWithoutStripe, freshKey, seedOrder } from "./support.ts"

const balance = (fingerprint: KeyFingerprint) =>
  Effect.flatMap(Ledger, (l) => l.account(fingerprint)).pipe(Effect.map(Option.getOrThrow))

describe("credit ledger", () => {
  it.layer(creditsWithoutStripe())("invariants", (it) => {
    it.effect("grants a pack once per order, however often it is asked", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        const orderId = yield* seedOrder(fingerprint)
        const results = yield* Effect.all([1, 2, 3].map(() => ledger.grant(orderId, fingerprint)))
        expect(results.filter(Boolean)).toHaveLength(1)
        expect(yield* balance(fingerprint)).toMatchObject({ available: 500, reserved: 0, blocked: false })
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("reserve, consume and release: exactly one settlement per reservation", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        yield* ledger.grant(yield* seedOrder(fingerprint), fingerprint)
        const a = yield* ledger.reserve(fingerprint, crypto.randomUUID())
        const again = yield* ledger.reserve(fingerprint, a.requestId)
        expect(again.reservationId).toBe(a.reservationId)
        expect(yield* balance(fingerprint)).toMatchObject({ available: 499, reserved: 1 })
        expect(yield* ledger.consume(a.reservationId)).toBe("settled")
        expect(yield* ledger.consume(a.reservationId)).toBe("already_consumed")
        expect(yield* ledger.release(a.reservationId)).toBe("already_consumed")
        const b = yield* ledger.reserve(fingerprint, crypto.randomUUID())
        expect(yield* ledger.release(b.reservationId)).toBe("settled")
        expect(yield* ledger.consume(b.reservationId)).toBe("already_released")
        // A released attempt lets a retry of the same request reserve again; a consumed one never does.
        const retry = yield* ledger.reserve(fingerprint, b.requestId)
        expect(retry.reservationId).not.toBe(b.reservationId)
        yield* ledger.releaseRequest(b.requestId)
        yield* ledger.releaseRequest(b.requestId)
        expect(yield* balance(fingerprint)).toMatchObject({ available: 499, reserved: 0 })
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("a repeated reserve answers with the request's reservation, its key spent or not; another key's is a conflict", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        yield* ledger.grant(yield* seedOrder(fingerprint), fingerprint)
        yield* Effect.forEach(Array.from({ length: 499 }, () => crypto.randomUUID()), (requestId) =>
          Effect.flatMap(ledger.reserve(fingerprint, requestId), (r) => ledger.consume(r.reservationId))
        )
        const last = yield* ledger.reserve(fingerprint, crypto.randomUUID())
        expect(yield* balance(fingerprint)).toMatchObject({ available: 0, reserved: 1 })
        expect((yield* ledger.reserve(fingerprint, last.requestId)).reservationId).toBe(last.reservationId)
        yield* ledger.consume(last.reservationId)
        expect((yield* ledger.reserve(fingerprint, last.requestId)).reservationId).toBe(last.reservationId)
        const other = yield* freshKey
        yield* ledger.grant(yield* seedOrder(other.fingerprint), other.fingerprint)
        const conflict = yield* Effect.either(ledger.reserve(other.fingerprint, last.requestId))
        expect(Either.isLeft(conflict) && conflict.left._tag).toBe("ReservationConflict")
        expect(yield* balance(other.fingerprint)).toMatchObject({ available: 500, reserved: 0 })
        expect(yield* balance(fingerprint)).toMatchObject({ available: 0, reserved: 0 })
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("a reversal may overdraw, pauses the key and refuses reservations", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        const orderId = yield* seedOrder(fingerprint)
        yield* ledger.grant(orderId, fingerprint)
        for (let i = 0; i < 3; i++) yield* Effect.flatMap(ledger.reserve(fingerprint, crypto.randomUUID()), (r) => ledger.consume(r.reservationId))
        const held = yield* ledger.reserve(fingerprint, crypto.randomUUID())
        expect(yield* ledger.applyCause(orderId, fingerprint, refundCause("re_1", "succeeded"))).toBe("reversed")
        expect(yield* ledger.applyCause(orderId, fingerprint, refundCause("re_1", "succeeded"))).toBe("unchanged")
        expect(yield* ledger.applyCause(orderId, fingerprint, refundCause("re_1", "pending"))).toBe("unchanged")
        expect(yield* balance(fingerprint)).toMatchObject({ available: -4, reserved: 1, blocked: true })
        const refused = yield* Effect.either(ledger.reserve(fingerprint, crypto.randomUUID()))
        expect(Either.isLeft(refused) && refused.left._tag === "ReserveRefused" && refused.left.reason).toBe("key_paused")
        // The analysis that was already running finishes normally.
        yield* ledger.release(held.reservationId)
        expect(yield* balance(fingerprint)).toMatchObject({ available: -3, reserved: 0, blocked: true })
        // A late grant of the reversed order changes nothing.
        expect(yield* ledger.grant(orderId, fingerprint)).toBe(false)
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("a refund that arrives before the grant grants and reverses together", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        const orderId = yield* seedOrder(fingerprint)
        yield* ledger.applyCause(orderId, fingerprint, disputeCause("dp_1", "needs_response"))
        expect(yield* ledger.grant(orderId, fingerprint)).toBe(false)
        expect(yield* balance(fingerprint)).toMatchObject({ available: 0, blocked: true })
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("a failed refund undoes its reversal with a compensating entry; the pause lifts when nothing else holds it", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const sql = yield* SqlClient.SqlClient
        const { fingerprint } = yield* freshKey
        const first = yield* seedOrder(fingerprint)
        yield* ledger.grant(first, fingerprint)
        yield* Effect.flatMap(ledger.reserve(fingerprint, crypto.randomUUID()), (r) => ledger.consume(r.reservationId))
        expect(yield* ledger.applyCause(first, fingerprint, refundCause("re_a", "pending"))).toBe("reversed")
        expect(yield* balance(fingerprint)).toMatchObject({ available: -1, blocked: true })
        expect(yield* ledger.applyCause(first, fingerprint, refundCause("re_a", "failed"))).toBe("restored")
        expect(yield* balance(fingerprint)).toMatchObject({ available: 499, blocked: false })
        // A late copy of the pending refund changes nothing: the failure is final.
        expect(yield* ledger.applyCause(first, fingerprint, refundCause("re_a", "pending"))).toBe("unchanged")
        expect(yield* ledger.applyCause(first, fingerprint, refundCause("re_a", "succeeded"))).toBe("unchanged")

        // A second refund of the same order reverses it again (cycle 2); a dispute on another order holds the pause.
        expect(yield* ledger.applyCause(first, fingerprint, refundCause("re_b", "succeeded"))).toBe("reversed")
        const second = yield* seedOrder(fingerprint)
        yield* ledger.grant(second, fingerprint)
        expect(yield* ledger.applyCause(second, fingerprint, disputeCause("dp_x", "needs_response"))).toBe("reversed")
        expect(yield* balance(fingerprint)).toMatchObject({ available: -1, blocked: true })
        expect(yield* ledger.applyCause(first, fingerprint, refundCause("re_b", "canceled"))).toBe("restored")
        expect(yield* balance(fingerprint)).toMatchObject({ available: 499, blocked: true })
        expect(yield* ledger.applyCause(second, fingerprint, disputeCause("dp_x", "won"))).toBe("restored")
        expect(yield* balance(fingerprint)).toMatchObject({ available: 999, blocked: false })
        const cycles = yield* sql<{ kind: string; cycle: number }>`
          SELECT kind, cycle FROM credit_entries WHERE order_id = ${first} AND kind IN ('reversal', 'restoration') ORDER BY entry_id`
        expect(cycles).toEqual([
          { kind: "reversal", cycle: 1 },
          { kind: "restoration", cycle: 1 },
          { kind: "reversal", cycle: 2 },
          { kind: "restoration", cycle: 2 }
        ])
        // A lost dispute stays reversed; a duplicate entry for a cycle is refused by the database itself.
        expect(yield* ledger.applyCause(second, fingerprint, disputeCause("dp_y", "lost"))).toBe("reversed")
        const forged = yield* Effect.either(sql`
          INSERT INTO credit_entries (fingerprint, kind, order_id, available_delta, reserved_delta, cycle, created_at)
          VALUES (${fingerprint}, 'reversal', ${second}, -500, 0, 2, now())`)
        expect(Either.isLeft(forged)).toBe(true)
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("insufficient credits is refused without touching the balance", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        yield* seedOrder(fingerprint)
        const refused = yield* Effect.either(ledger.reserve(fingerprint, crypto.randomUUID()))
        expect(Either.isLeft(refused) && refused.left._tag === "ReserveRefused" && refused.left.reason).toBe("insufficient_credits")
        expect(yield* balance(fingerprint)).toMatchObject({ available: 0, reserved: 0 })
      }))

    it.effect("entries are insert-only and the constraints refuse a second grant", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        const orderId = yield* seedOrder(fingerprint)
        yield* ledger.grant(orderId, fingerprint)
        const update = yield* Effect.either(sql`UPDATE credit_entries SET available_delta = 1000 WHERE order_id = ${orderId}`)
        expect(Either.isLeft(update)).toBe(true)
        const remove = yield* Effect.either(sql`DELETE FROM credit_entries WHERE order_id = ${orderId}`)
        expect(Either.isLeft(remove)).toBe(true)
        const second = yield* Effect.either(sql`
          INSERT INTO credit_entries (fingerprint, kind, order_id, available_delta, reserved_delta, created_at)
          VALUES (${fingerprint}, 'grant', ${orderId}, 500, 0, now())`)
        expect(Either.isLeft(second)).toBe(true)
        const forged = yield* Effect.either(sql`
          INSERT INTO credit_entries (fingerprint, kind, order_id, available_delta, reserved_delta, created_at)
          VALUES (${fingerprint}, 'grant', ${yield* seedOrder(fingerprint)}, 5000, 0, now())`)
        expect(Either.isLeft(forged)).toBe(true)
      }))
  })
})

describe.skipIf(!realPostgresUrl)("credit ledger on real PostgreSQL (concurrency)", () => {
  it.layer(creditsWithoutStripe())("races", (it) => {
    it.effect("50 concurrent reserves against 10 credits: exactly 10 succeed, never negative", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        yield* ledger.grant(yield* seedOrder(fingerprint), fingerprint)
        // Spend down to 10 credits through the ledger itself (490 analyses, 8 at a time).
        yield* Effect.forEach(
          Array.from({ length: 490 }, () => crypto.randomUUID()),
          (requestId) => Effect.flatMap(ledger.reserve(fingerprint, requestId), (r) => ledger.consume(r.reservationId)),
          { concurrency: 8 }
        )
        expect(yield* balance(fingerprint)).toMatchObject({ available: 10 })
        const results = yield* Effect.all(
          Array.from({ length: 50 }, () => Effect.either(ledger.reserve(fingerprint, crypto.randomUUID()))),
          { concurrency: "unbounded" }
        )
        const won = results.filter(Either.isRight)
        expect(won).toHaveLength(10)
        expect(yield* balance(fingerprint)).toMatchObject({ available: 0, reserved: 10 })
        yield* Effect.all(
          won.map((r) => ledger.consume(r.right.reservationId)),
          { concurrency: "unbounded" }
        )
        expect(yield* balance(fingerprint)).toMatchObject({ available: 0, reserved: 0 })
        expect(yield* auditLedger).toEqual([])
      }), 60_000)

    it.effect("ten concurrent reserves of one request: one credit held, every one answered with its reservation", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        yield* ledger.grant(yield* seedOrder(fingerprint), fingerprint)
        for (let i = 0; i < 10; i++) {
          const requestId = crypto.randomUUID()
          const held = yield* Effect.all(
            Array.from({ length: 10 }, () => ledger.reserve(fingerprint, requestId)),
            { concurrency: "unbounded" }
          )
          expect(new Set(held.map((r) => r.reservationId)).size).toBe(1)
        }
        expect(yield* balance(fingerprint)).toMatchObject({ available: 490, reserved: 10 })
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("concurrent consume and release of one reservation: exactly one wins", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        yield* ledger.grant(yield* seedOrder(fingerprint), fingerprint)
        for (let i = 0; i < 20; i++) {
          const r = yield* ledger.reserve(fingerprint, crypto.randomUUID())
          const outcomes = yield* Effect.all(
            [ledger.consume(r.reservationId), ledger.release(r.reservationId), ledger.consume(r.reservationId), ledger.release(r.reservationId)],
            { concurrency: "unbounded" }
          )
          expect(outcomes.filter((o) => o === "settled")).toHaveLength(1)
        }
        expect(yield* auditLedger).toEqual([])
      }))

    it.effect("concurrent grants, reversals and restorations of one order: each transition once", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger
        const { fingerprint } = yield* freshKey
        const orderId = yield* seedOrder(fingerprint)
        const grants = yield* Effect.all(
          Array.from({ length: 10 }, () => ledger.grant(orderId, fingerprint)),
          { concurrency: "unbounded" }
        )
        expect(grants.filter(Boolean)).toHaveLength(1)
        const reversals = yield* Effect.all(
          Array.from({ length: 10 }, () => ledger.applyCause(orderId, fingerprint, refundCause("re_1", "pending"))),
          { concurrency: "unbounded" }
        )
        expect(reversals.filter((o) => o === "reversed")).toHaveLength(1)
        expect(yield* balance(fingerprint)).toMatchObject({ available: 0, blocked: true })
        // The refund fails while copies of its pending report are still arriving: restored exactly once.
        const mixed = yield* Effect.all(
          Array.from({ length: 12 }, (_, i) => ledger.applyCause(orderId, fingerprint, refundCause("re_1", i % 3 === 0 ? "failed" : "pending"))),
          { concurrency: "unbounded" }
        )
        expect(mixed.filter((o) => o === "restored")).toHaveLength(1)
        expect(mixed.filter((o) => o === "reversed")).toHaveLength(0)
        expect(yield* balance(fingerprint)).toMatchObject({ available: 500, blocked: false })
        // Two orders of one key restored at once: the pause is lifted (the account row serializes them).
        const a = yield* seedOrder(fingerprint)
        yield* ledger.grant(a, fingerprint)
        const b = yield* seedOrder(fingerprint)
        yield* ledger.grant(b, fingerprint)
        yield* ledger.applyCause(a, fingerprint, disputeCause("dp_a", "needs_response"))
        yield* ledger.applyCause(b, fingerprint, disputeCause("dp_b", "needs_response"))
        yield* Effect.all(
          [ledger.applyCause(a, fingerprint, disputeCause("dp_a", "won")), ledger.applyCause(b, fingerprint, disputeCause("dp_b", "won"))],
          { concurrency: "unbounded" }
        )
        expect(yield* balance(fingerprint)).toMatchObject({ available: 1500, blocked: false })
        expect(yield* auditLedger).toEqual([])
      }))
  })
})

if (!realPostgresUrl) {
  describe("credit ledger on real PostgreSQL (concurrency)", () => {
    it.skip("skipped: set TEST_DATABASE_URL=postgres://… to run the concurrency tests on a real server", () => {})
  })
}
