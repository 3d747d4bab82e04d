/** x402 in tests: the settings of a server paid on a test chain, and payers signing with the official client (exact EVM scheme, viem account). */
import { x402Client } from "@x402/core/client"
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from "@x402/core/http"
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from "@x402/core/types"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import type { Address, Hex } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { NETWORK } from "../../src/x402/protocol.ts"
import type { PaymentChain } from "./memoryChain.ts"

export const PUBLIC_BASE_URL = "https://morsel.example"

/** The settings of a server that takes x402 payments on `chain`. */
export const x402Env = (chain: PaymentChain, extra: Readonly<Record<string, string>> = {}): Record<string, string> => ({
  ...chain.env,
  PUBLIC_BASE_URL,
  // Short: a paused chain turns into payment_pending quickly; a mining chain confirms at the first look anyway.
  X402_CONFIRM_TIMEOUT_MS: "500",
  LOG_LEVEL: "warning",
  ...extra
})

/** A client that pays with `account` and accepts our local test token (the official client refuses unknown tokens). */
export const payingClient = (account: PrivateKeyAccount, asset: Address) =>
  x402Client.fromConfig({
    schemes: [{ network: "eip155:*", client: new ExactEvmScheme(account) }],
    spendControls: { allowedAssets: [{ network: NETWORK, asset }] }
  })

/** Signs a payment for the challenge, optionally with altered terms (to produce invalid payments). */
export const signPayment = async (
  account: PrivateKeyAccount,
  challenge: PaymentRequired,
  alter: (r: PaymentRequirements) => PaymentRequirements = (r) => r
): Promise<PaymentPayload> => {
  const accepted = challenge.accepts[0]
  if (!accepted) throw new Error("challenge has no accepts entry")
  const altered = alter(accepted)
  const client = x402Client.fromConfig({
    schemes: [{ network: "eip155:*", client: new ExactEvmScheme(account) }],
    spendControls: false
  })
  const payload = await client.createPaymentPayload({ ...challenge, accepts: [altered] })
  // A payload always names the terms it answers; keep the network the payer really signed for.
  return payload
}

export const header = (payload: PaymentPayload) => encodePaymentSignatureHeader(payload)

export const challengeOf = (headerValue: string) => decodePaymentRequiredHeader(headerValue)

/** Flips one byte of the payload's signature: same authorization, bad signature. */
export const withBrokenSignature = (payload: PaymentPayload): PaymentPayload => {
  const signature = payload.payload["signature"]
  if (typeof signature !== "string") throw new Error("payload has no signature")
  const flipped = (signature.slice(0, 10) + (signature[10] === "a" ? "b" : "a") + signature.slice(11)) as Hex
  return { ...payload, payload: { ...payload.payload, signature: flipped } }
}

export const authorizationOf = (payload: PaymentPayload) => {
  const auth = payload.payload["authorization"]
  if (typeof auth !== "object" || auth === null) throw new Error("payload has no authorization")
  const { from, nonce, validBefore } = auth as { from: Address; nonce: Hex; validBefore: string }
  return { from, nonce, validBefore: BigInt(validBefore) }
}
