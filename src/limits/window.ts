/** The windows every limit counts in: rolling windows (the period that ends now) and fixed ones (calendar-aligned periods). */
import { Clock, Effect, Ref } from "effect"

export const MINUTE_MS = 60_000
export const HOUR_MS = 60 * MINUTE_MS
export const DAY_MS = 24 * HOUR_MS

/** At most `limit` events in any rolling window of `windowMs`: "30 per hour" is 30 in the hour before every instant. */
export interface RollingAllowance {
  readonly limit: number
  readonly windowMs: number
}

/** The start of the rolling window that ends at `nowMs`; an event exactly at it has left (only later events count). */
export const rollingWindowStart = (windowMs: number, nowMs: number): number => nowMs - windowMs

/** Whether an event at `atMs` still counts in the rolling window that ends at `nowMs`. */
export const inRollingWindow = (windowMs: number, nowMs: number, atMs: number): boolean =>
  atMs > rollingWindowStart(windowMs, nowMs)

/** The start of the fixed window of `windowMs` holding `nowMs`, aligned to the epoch (a minute starts at :00). */
export const fixedWindowStart = (windowMs: number, nowMs: number): number => nowMs - (nowMs % windowMs)

/**
 * A rolling allowance counted in this process's memory, for a budget that only this process spends: no instance
 * waits for another's count, at the price of each instance spending the whole allowance on its own.
 */
export const makeLocalAllowance = (allowance: RollingAllowance) =>
  Effect.map(Ref.make<ReadonlyArray<number>>([]), (taken) => ({
    /** Takes one event of the window now, or answers false (taking nothing) when the window is full. */
    take: Effect.flatMap(Clock.currentTimeMillis, (nowMs) =>
      Ref.modify(taken, (times): readonly [boolean, ReadonlyArray<number>] => {
        const recent = times.filter((atMs) => inRollingWindow(allowance.windowMs, nowMs, atMs))
        return recent.length >= allowance.limit ? [false, recent] : [true, [...recent, nowMs]]
      })
    )
  }))
