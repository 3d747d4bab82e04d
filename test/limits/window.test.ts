// The windows limits count in: an event leaves a rolling window exactly one period later; an in-process allowance on TestClock.
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { fixedWindowStart, HOUR_MS, inRollingWindow, makeLocalAllowance, MINUTE_MS } from "../../src/limits/window.ts"

const MONDAY_1045 = Date.parse("2026-03-02T10:45:00Z")

describe("windows", () => {
  it("a rolling hour holds an event until exactly an hour later; a fixed minute starts at :00", () => {
    expect(inRollingWindow(HOUR_MS, MONDAY_1045 + HOUR_MS - 1, MONDAY_1045)).toBe(true)
    expect(inRollingWindow(HOUR_MS, MONDAY_1045 + HOUR_MS, MONDAY_1045)).toBe(false)
    expect(new Date(fixedWindowStart(MINUTE_MS, MONDAY_1045 + 59_999)).toISOString()).toBe("2026-03-02T10:45:00.000Z")
  })

  it.effect("a local allowance of 2 per hour: the 3rd is refused until the 1st turns an hour old; refusals take nothing", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_1045)
      const budget = yield* makeLocalAllowance({ limit: 2, windowMs: HOUR_MS })
      const takeMany = (n: number) => Effect.forEach(Array.from({ length: n }), () => budget.take)
      expect(yield* budget.take).toBe(true)
      // 11:05, a new calendar hour: the 10:45 request still counts.
      yield* TestClock.adjust(20 * MINUTE_MS)
      expect(yield* takeMany(3)).toEqual([true, false, false])
      yield* TestClock.setTime(MONDAY_1045 + HOUR_MS - 1)
      expect(yield* budget.take).toBe(false)
      // 11:45: the 10:45 request has left; the 11:05 one still fills half the window.
      yield* TestClock.setTime(MONDAY_1045 + HOUR_MS)
      expect(yield* takeMany(2)).toEqual([true, false])
    }))
})
