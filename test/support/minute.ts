/**
 * The free food calls are counted per calendar minute of the server's clock: calls on both sides of a minute's end
 * are two minutes' calls. A test on a real clock that counts calls within one minute starts them where at least
 * `needMs` of the minute are left (waiting for the next minute otherwise).
 */
import { Effect } from "effect"

const MINUTE_MS = 60_000

export const withinOneMinute = (needMs = 10_000) =>
  Effect.promise(() => {
    const left = MINUTE_MS - (Date.now() % MINUTE_MS)
    return left >= needMs ? Promise.resolve() : new Promise<void>((resolve) => setTimeout(resolve, left + 100))
  })
