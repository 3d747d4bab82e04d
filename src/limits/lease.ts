/** How long an analysis attempt may hold its idempotency key and its concurrency slot before it is presumed gone. */
import type { Settings } from "../config.ts"

/** Margin past the deadline and the settlement wait, for the attempt's own bookkeeping after both. */
const LEASE_MARGIN_MS = 60_000

/** The whole analysis deadline plus the settlement wait plus a margin; past it another instance may take over. */
export const attemptLeaseMs = (settings: Settings): number =>
  settings.analysisTimeoutMs + settings.x402.confirmTimeoutMs + LEASE_MARGIN_MS
