/** Who pays for an analysis: the idempotency scope and the subject of per-payer limits. */

/** The two ways an analysis is paid for: prepaid card credits, or one x402 payment per call. */
export type FundingKind = "credit" | "x402"

export interface Payer {
  readonly kind: FundingKind
  /** Stable identifier, e.g. `key:<fingerprint>` or `wallet:<lowercase address>`; never a secret. */
  readonly id: string
}
