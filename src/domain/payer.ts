/** Who pays for an analysis: the idempotency scope and the subject of per-payer limits. */
import { Schema } from "effect"
import type { PayerId } from "./ids.ts"

/** The two ways an analysis is paid for: prepaid card credits, or one x402 payment per call. */
export const FundingKind = Schema.Literal("credit", "x402")
export type FundingKind = typeof FundingKind.Type

export interface Payer {
  readonly kind: FundingKind
  /** Stable identifier, e.g. `key:<fingerprint>` or `wallet:<lowercase address>`; never a secret. */
  readonly id: PayerId
}
