/** The verifier's reason codes for a refused payment, in words a payer can act on. */
import { NETWORK } from "./protocol.ts"

const reasons: Record<string, string> = {
  invalid_exact_evm_payload_authorization_valid_before: "the authorization has expired (validBefore is past or too close)",
  invalid_exact_evm_payload_authorization_valid_after: "the authorization is not valid yet (validAfter is in the future)",
  invalid_exact_evm_insufficient_balance: "the paying wallet holds less than the price (0.01 USDC)",
  invalid_exact_evm_recipient_mismatch: "the authorization pays another address than the challenge's payTo",
  invalid_exact_evm_payload_authorization_value_mismatch: "the authorization's amount is not exactly the price (10000)",
  invalid_exact_evm_network_mismatch: `the payment is for another network than ${NETWORK}`,
  invalid_exact_evm_signature: "the EIP-712 signature does not match the authorization and its signer",
  invalid_exact_evm_nonce_already_used: "this authorization was already used on chain",
  invalid_exact_evm_scheme: "the payment's scheme is not exact",
  invalid_exact_evm_token_name_mismatch: "the payment was signed for another token domain (use name \"USD Coin\", version \"2\")",
  invalid_exact_evm_token_version_mismatch: "the payment was signed for another token domain (use name \"USD Coin\", version \"2\")",
  invalid_exact_evm_transaction_simulation_failed: "the transfer would fail on chain",
  invalid_exact_evm_failed_to_parse_signature: "the signature cannot be parsed",
  eip6492_factory_not_allowed: "smart-contract wallets are not supported; pay from an externally owned account",
  unsupported_payload_type: "only EIP-3009 authorizations are accepted"
}


/** A reason code with words a person can act on. */
export const explain = (reason: string): string => {
  const words = reasons[reason]
  return words ? `${words} (${reason})` : reason
}
