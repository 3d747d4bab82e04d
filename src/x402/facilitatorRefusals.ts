/** How to read an x402 facilitator's refusal of a settlement: whether it came before anything was broadcast. */

/**
 * Reasons the exact-EVM facilitator gives only from its verification, before it sends anything. Anything else
 * (invalid_exact_evm_transaction_failed is also what a timed-out send becomes) may follow a broadcast.
 */
const PRE_BROADCAST_REASONS: ReadonlySet<string> = new Set([
  "invalid_exact_evm_scheme",
  "invalid_exact_evm_network_mismatch",
  "invalid_exact_evm_missing_eip712_domain",
  "invalid_exact_evm_recipient_mismatch",
  "invalid_exact_evm_signature",
  "invalid_exact_evm_payload_authorization_valid_before",
  "invalid_exact_evm_payload_authorization_valid_after",
  "invalid_exact_evm_authorization_value",
  "invalid_exact_evm_payload_authorization_value_mismatch",
  "invalid_exact_evm_token_name_mismatch",
  "invalid_exact_evm_token_version_mismatch",
  "invalid_exact_evm_eip3009_not_supported",
  "invalid_exact_evm_insufficient_balance",
  "invalid_exact_evm_transaction_simulation_failed",
  "invalid_exact_evm_failed_to_parse_signature",
  "unsupported_payload_type",
  "eip6492_factory_not_allowed"
])

export const refusedBeforeBroadcast = (reason: string): boolean => PRE_BROADCAST_REASONS.has(reason)
