// Duplicate refund and dispute deliveries racing each other on real PostgreSQL: every story still ends once.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { realPostgresUrl } from "../support/database.ts"
import { Driver, memoryUnderTest } from "./drivers.ts"
import { paidOrder, standing, stories } from "./reversalOrders.ts"
import { auditLedger } from "./support.ts"

describe.skipIf(!realPostgresUrl)("refunds and disputes on real PostgreSQL (concurrency)", () => {
  it.layer(memoryUnderTest)("races", (it) => {
    it.effect("every event of a story delivered three times at once: one reversal, one restoration at most", () =>
      Effect.gen(function* () {
        const driver = yield* Driver
        yield* driver.pinClock
        for (let round = 0; round < 3; round++) {
          for (const story of stories) {
            const { fingerprint, orderId, sessionId } = yield* paidOrder
            const events = yield* story.play(sessionId)
            const answers = yield* Effect.all(
              [...events, ...events, ...events].map((event) => driver.deliver(event)),
              { concurrency: "unbounded" }
            )
            expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200))
            expect({ story: story.name, ...(yield* standing(fingerprint, orderId)) }).toEqual({ story: story.name, ...story.ends })
          }
        }
        expect(yield* auditLedger).toEqual([])
      }), 120_000)
  })
})

if (!realPostgresUrl) {
  describe("refunds and disputes on real PostgreSQL (concurrency)", () => {
    it.skip("skipped: set TEST_DATABASE_URL=postgres://… to race duplicate deliveries on a real server", () => {})
  })
}
