/**
 * Paying over x402 with the official `@x402/fetch`: it answers the 402 challenge with a payment signed by the wallet,
 * within the client's terms only (price.ts): an offer beyond them is never signed and the call fails with what was
 * asked. The transport under it keeps the PAYMENT-SIGNATURE it sent, so a `payment_pending` answer can be retried
 * with the very same signed authorization (SPEC §3.1), never a new one. Loaded only when a wallet pays.
 */
import { type PaymentTerms, priceRefused, withinTerms } from "./price.ts"

/** A fetch that pays, and the signature of the last payment it made. */
export interface PayingFetch {
  readonly fetch: typeof fetch
  readonly lastSignature: () => string | undefined
}

export const payingFetch = async (walletPrivateKey: `0x${string}`, transport: typeof fetch, terms: PaymentTerms): Promise<PayingFetch> => {
  const [{ wrapFetchWithPayment, x402Client }, { decodePaymentRequiredHeader }, { ExactEvmScheme }, { privateKeyToAccount }] = await Promise.all([
    import("@x402/fetch"),
    import("@x402/core/http"),
    import("@x402/evm/exact/client"),
    import("viem/accounts")
  ])
  const account = privateKeyToAccount(walletPrivateKey)
  let signature: string | undefined
  let refused: Response | undefined
  let challenge: string | undefined
  const recording: typeof fetch = async (input, init) => {
    const sent = new Headers(input instanceof Request ? input.headers : init?.headers).get("payment-signature")
    if (sent !== null) signature = sent
    const response = await transport(input, init)
    // A 402 without a challenge (x402 off on that server) is handed back as the server gave it, with its own words.
    refused = response.status === 402 && !response.headers.has("payment-required") ? response.clone() : undefined
    if (response.status === 402) challenge = response.headers.get("payment-required") ?? undefined
    return response
  }
  const client = new x402Client()
    .register("eip155:*", new ExactEvmScheme(account))
    // The terms decide alone: the library's own default ($1 on any token it knows) would sign 100 times the price.
    .setSpendControls(false)
    .registerPolicy((version, offers) => (version === 2 ? offers.filter((offer) => withinTerms(terms, offer)) : []))
  const paying = wrapFetchWithPayment(recording, client)
  /** The refusal of a challenge that offers nothing within the terms; undefined when it offered something within them. */
  const beyondTerms = () => {
    if (challenge === undefined) return undefined
    try {
      const offers = decodePaymentRequiredHeader(challenge).accepts
      return offers.some((offer) => withinTerms(terms, offer)) ? undefined : priceRefused(terms, offers)
    } catch {
      return priceRefused(terms, [])
    }
  }
  return {
    fetch: async (input, init) => {
      signature = undefined
      refused = undefined
      challenge = undefined
      try {
        return await paying(input, init)
      } catch (error) {
        if (refused !== undefined) return refused
        throw beyondTerms() ?? error
      }
    },
    lastSignature: () => signature
  }
}
