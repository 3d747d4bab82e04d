/**
 * Refund and dispute stories as the processor tells them: each step's events are taken when they happen, then
 * delivered in every order, each twice. Whatever the order, the order ends where the story ends.
 */
import { expect } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { Json } from "../../src/credits/cards.ts"
import { Checkout } from "../../src/credits/Checkout.ts"
import { Ledger } from "../../src/credits/Ledger.ts"
import type { KeyFingerprint, OrderId } from "../../src/domain/ids.ts"
import { Driver } from "./drivers.ts"
import { auditLedger, freshKey, newOrderId } from "./support.ts"

export interface Story {
  readonly name: string
  /** Plays the story on a paid session and returns its events, taken as each step happened. */
  readonly play: (sessionId: string) => Effect.Effect<ReadonlyArray<Json>, never, Driver>
  readonly ends: { readonly state: "paid" | "reversed"; readonly credits: number; readonly blocked: boolean }
}

const refundStory = (settles: "failed" | "succeeded"): Story => ({
  name: `a pending refund that ${settles === "succeeded" ? "succeeds" : "fails"}`,
  play: (sessionId) =>
    Effect.gen(function* () {
      const driver = yield* Driver
      const completed = yield* driver.event("completed", sessionId)
      const refund = yield* driver.refund(sessionId, "pending")
      const created = yield* driver.event("refundCreated", refund)
      const charge = yield* driver.event("chargeRefunded", sessionId)
      driver.updateRefund(refund, settles)
      return [completed, created, charge, yield* driver.event("refundUpdated", refund)]
    }),
  ends: settles === "succeeded" ? { state: "reversed", credits: 0, blocked: true } : { state: "paid", credits: 500, blocked: false }
})

const disputeStory = (closes: "won" | "lost"): Story => ({
  name: `a dispute ${closes}`,
  play: (sessionId) =>
    Effect.gen(function* () {
      const driver = yield* Driver
      const completed = yield* driver.event("completed", sessionId)
      const dispute = yield* driver.dispute(sessionId)
      const created = yield* driver.event("disputeCreated", dispute)
      driver.updateDispute(dispute, closes)
      return [completed, created, yield* driver.event("disputeClosed", dispute)]
    }),
  ends: closes === "won" ? { state: "paid", credits: 500, blocked: false } : { state: "reversed", credits: 0, blocked: true }
})

export const stories: ReadonlyArray<Story> = [refundStory("failed"), refundStory("succeeded"), disputeStory("won"), disputeStory("lost")]

export const permutations = <A>(items: ReadonlyArray<A>): ReadonlyArray<ReadonlyArray<A>> =>
  items.length <= 1
    ? [items]
    : items.flatMap((item, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]))

/** A fresh key whose order's session is paid at the processor (no event delivered yet). */
export const paidOrder = Effect.gen(function* () {
  const driver = yield* Driver
  const checkout = yield* Checkout
  const { fingerprint } = yield* freshKey
  const orderId = newOrderId()
  const session = yield* checkout.checkout(fingerprint, orderId, Option.none())
  if (session._tag !== "Session") throw new Error("expected a new checkout")
  driver.pay(session.sessionId)
  return { fingerprint, orderId, sessionId: session.sessionId }
})

/** Where the order and its key stand, as the key's owner sees it. */
export const standing = (fingerprint: KeyFingerprint, orderId: OrderId) =>
  Effect.gen(function* () {
    const checkout = yield* Checkout
    const ledger = yield* Ledger
    const view = yield* checkout.status(fingerprint, orderId)
    const account = Option.getOrThrow(yield* ledger.account(fingerprint))
    return { state: view.state, credits: account.available, blocked: account.blocked }
  })

/** Every story, its events in every order and then again in the reverse order (duplicates). */
export const everyOrder = Effect.gen(function* () {
  const driver = yield* Driver
  yield* driver.pinClock
  for (const story of stories) {
    const first = yield* paidOrder
    const events = yield* story.play(first.sessionId)
    for (const [n, order] of permutations(events.map((_, i) => i)).entries()) {
      const { fingerprint, orderId, sessionId } = n === 0 ? first : yield* paidOrder
      const played = n === 0 ? events : yield* story.play(sessionId)
      for (const i of [...order, ...[...order].reverse()]) {
        const answer = yield* driver.deliver(played[i] ?? null)
        expect({ story: story.name, order, status: answer.status }).toEqual({ story: story.name, order, status: 200 })
      }
      expect({ story: story.name, order, ...(yield* standing(fingerprint, orderId)) }).toEqual({ story: story.name, order, ...story.ends })
    }
  }
  expect(yield* auditLedger).toEqual([])
})
