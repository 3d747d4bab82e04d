/**
 * Paying over x402 with the official `@x402/fetch`: it answers the 402 challenge with a payment signed by the wallet.
 * The transport under it keeps the PAYMENT-SIGNATURE it sent, so a `payment_pending` answer can be retried with the
 * very same signed authorization (SPEC §3.1), never a new one. Loaded only when a wallet pays.
 */

/** A fetch that pays, and the signature of the last payment it made. */
export interface PayingFetch {
  readonly fetch: typeof fetch
  readonly lastSignature: () => string | undefined
}

export const payingFetch = async (walletPrivateKey: `0x${string}`, transport: typeof fetch): Promise<PayingFetch> => {
  const [{ wrapFetchWithPayment, x402Client }, { ExactEvmScheme }, { privateKeyToAccount }] = await Promise.all([
    import("@x402/fetch"),
    import("@x402/evm/exact/client"),
    import("viem/accounts")
  ])
  const account = privateKeyToAccount(walletPrivateKey)
  let signature: string | undefined
  let refused: Response | undefined
  const recording: typeof fetch = async (input, init) => {
    const sent = new Headers(input instanceof Request ? input.headers : init?.headers).get("payment-signature")
    if (sent !== null) signature = sent
    const response = await transport(input, init)
    // A 402 without a challenge (x402 off on that server) is handed back as the server gave it, with its own words.
    refused = response.status === 402 && !response.headers.has("payment-required") ? response.clone() : undefined
    return response
  }
  const paying = wrapFetchWithPayment(recording, new x402Client().register("eip155:*", new ExactEvmScheme(account)))
  return {
    fetch: async (input, init) => {
      signature = undefined
      refused = undefined
      try {
        return await paying(input, init)
      } catch (error) {
        if (refused !== undefined) return refused
        throw error
      }
    },
    lastSignature: () => signature
  }
}
