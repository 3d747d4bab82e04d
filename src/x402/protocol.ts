/** The x402 v2 wire artifacts of morsel: the price challenge, the decoded payment and its receipt. */
import type {
  Network,
  PaymentPayload,
  PaymentRequired as X402PaymentRequired,
  PaymentRequirements,
  ResourceInfo,
  SettleResponse
} from "@x402/core/types"
import { bazaarResourceServerExtension, declareDiscoveryExtension, isValidIconUrl } from "@x402/extensions/bazaar"
import { decodePaymentSignatureHeader, encodePaymentRequiredHeader, encodePaymentResponseHeader } from "@x402/core/http"
import { parsePaymentPayload } from "@x402/core/schemas"
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Option, Schema } from "effect"
import { type Address, getAddress, type Hex, hashTypedData, isAddress, isHex, recoverTypedDataAddress } from "viem"
import type { PaymentProof } from "../analysis/Funding.ts"
import { PaymentRequired } from "../domain/errors.ts"
import { AnalysisResult, AnalyzeRequest, analysisResultExample, analyzeRequestExample, jsonSchemaOf } from "../domain/schemas.ts"

export const X402_VERSION = 2
export const NETWORK = "eip155:8453"
export const CHAIN_ID = 8453
/** The price, 0.01 USDC, in 6-decimal units. */
export const PRICE = "10000"
/** The official client signs `validBefore = now + maxTimeoutSeconds`: room for analysis, settlement and a pending retry. */
export const MAX_TIMEOUT_SECONDS = 600
/** Base mainnet USDC's EIP-712 domain (not "USDC", which is Base Sepolia's). */
export const TOKEN_DOMAIN = { name: "USD Coin", version: "2" } as const
export const ANALYZE_PATH = "/v1/analyze"

export const HEADER_PAYMENT_REQUIRED = "PAYMENT-REQUIRED"
export const HEADER_PAYMENT_SIGNATURE = "PAYMENT-SIGNATURE"
export const HEADER_PAYMENT_RESPONSE = "PAYMENT-RESPONSE"

/** A hash, nonce or signed transaction as viem types it (`0x…`), when read back from storage. */
export const HexString = Schema.TemplateLiteral("0x", Schema.String)

export interface Terms {
  readonly payTo: Address
  readonly asset: Address
  readonly publicBaseUrl: string
}

/** The one way morsel accepts to be paid per call. */
export const requirements = (terms: Terms): PaymentRequirements => ({
  scheme: "exact",
  network: NETWORK,
  amount: PRICE,
  asset: getAddress(terms.asset),
  payTo: getAddress(terms.payTo),
  maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
  extra: { ...TOKEN_DOMAIN }
})

/** Where the server serves its icon (the same picture the MCP server and server.json name). */
export const ICON_FILE_PATH = "/icon.svg"

/**
 * What x402 discovery services (the Bazaar) show of the resource: the URL and description name the interface; the
 * service name, tags (at most 5 of at most 32 ASCII characters) and icon are the Bazaar's service metadata. The icon
 * is named only where the Bazaar would keep it: at a host name (not an IP address, not localhost).
 */
export const resourceInfo = (url: string, description: string): ResourceInfo => {
  const iconUrl = new URL(ICON_FILE_PATH, url).href
  return {
    url,
    description,
    mimeType: "application/json",
    serviceName: "morsel",
    tags: ["nutrition", "food", "calories", "vision", "macronutrients"],
    ...(isValidIconUrl(iconUrl) ? { iconUrl } : {})
  }
}

/** A JSON Schema without its prose (descriptions, titles, examples): the shape alone, small enough for a header. */
const shapeOnly = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(shapeOnly)
  if (typeof node !== "object" || node === null) return node
  return Object.fromEntries(
    Object.entries(node)
      .filter(([key]) => key !== "description" && key !== "title" && key !== "examples")
      .map(([key, value]) => [key, shapeOnly(value)])
  )
}

/**
 * The result of a paid call for discovery metadata: an example and the shape of every result (inlined, since the
 * package places it inside its own schema). The official client echoes the extensions in PAYMENT-SIGNATURE, and
 * request headers must stay well under the servers' 16 KB limit (the challenge header stays under 8 KB).
 */
export const discoveryOutput = {
  example: analysisResultExample,
  schema: shapeOnly(jsonSchemaOf(AnalysisResult, { inline: true })) as Record<string, unknown>
}

/**
 * Discovery metadata of POST /v1/analyze (x402 Bazaar extension), built by the official package: a JSON body
 * with its schema and an example, and an example result. The method is added by the package's own server-side
 * enrichment, as the reference sellers do for each request.
 */
const httpDiscovery: unknown = (() => {
  const { bazaar } = declareDiscoveryExtension({
    bodyType: "json",
    input: { ...analyzeRequestExample },
    inputSchema: jsonSchemaOf(AnalyzeRequest, { inline: true }),
    output: discoveryOutput
  })
  return bazaarResourceServerExtension.enrichDeclaration?.(bazaar, { method: "POST", adapter: { getPath: () => ANALYZE_PATH } }) ?? bazaar
})()

export const paymentRequired = (terms: Terms, error?: string): X402PaymentRequired => ({
  x402Version: X402_VERSION,
  ...(error ? { error } : {}),
  resource: resourceInfo(
    terms.publicBaseUrl + ANALYZE_PATH,
    "Nutrition estimate (calories, protein, carbohydrate, fat) of one food photo; paid only when the analysis succeeds"
  ),
  accepts: [requirements(terms)],
  extensions: { bazaar: httpDiscovery }
})

/** The same price for another interface to the analysis (the MCP tool): its own resource and discovery metadata. */
export const retarget = (challenge: X402PaymentRequired, resource: ResourceInfo, bazaar: unknown): X402PaymentRequired => ({
  ...challenge,
  resource,
  extensions: { ...challenge.extensions, bazaar }
})

const setHeader = (name: string, value: string) =>
  HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeader(response, name, value)))

/** The PAYMENT-REQUIRED header of a challenge. */
export const paymentRequiredHeader = (challenge: X402PaymentRequired): string => encodePaymentRequiredHeader(challenge)

/** A 402 carrying a fresh challenge in the body and in PAYMENT-REQUIRED. */
export const challengeFailure = (
  terms: Terms,
  code: "payment_required" | "invalid_payment" | "insufficient_credits" | "key_paused",
  message: string,
  failedReceipt?: SettleResponse
): Effect.Effect<never, PaymentRequired> => {
  const challenge = paymentRequired(terms, code === "payment_required" ? undefined : message)
  return setHeader(HEADER_PAYMENT_REQUIRED, paymentRequiredHeader(challenge)).pipe(
    Effect.zipRight(
      Effect.fail(
        new PaymentRequired({
          error: { code, message },
          payment_required: challenge,
          ...(failedReceipt === undefined ? {} : { payment_response: failedReceipt })
        })
      )
    )
  )
}

/** Without X402_PAY_TO there is nobody to pay: say so, issue no challenge, and point to credits only where they are sold. */
export const unavailable = (cardCredits: boolean): Effect.Effect<never, PaymentRequired> =>
  Effect.fail(
    new PaymentRequired({
      error: {
        code: "x402_unavailable",
        message: cardCredits
          ? "Per-call x402 payments are not enabled on this server; use a prepaid credit key (Authorization: Bearer)."
          : "This server takes no payments yet: its operator has set neither X402_PAY_TO (per-call x402 payments) nor STRIPE_SECRET_KEY (card credits), so no analysis can be paid for. Nothing was charged."
      }
    })
  )

export const setRetryAfter = (seconds: number) => setHeader("Retry-After", String(seconds))
export const setPaymentResponse = (value: string) => setHeader(HEADER_PAYMENT_RESPONSE, value)

/** The signed EIP-3009 authorization inside an exact-scheme payment. */
export interface Authorization {
  readonly from: Address
  readonly to: Address
  readonly value: string
  readonly validAfter: string
  readonly validBefore: string
  readonly nonce: Hex
}

export interface DecodedPayment {
  readonly payload: PaymentPayload
  readonly authorization: Authorization
  readonly signature: Hex
  /** Lowercase payer address: the idempotency scope and the subject of per-wallet limits. */
  readonly payer: string
}

const isNetwork = (s: string): s is Network => /^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/.test(s)

const decimal = (s: unknown): s is string => typeof s === "string" && /^[0-9]{1,78}$/.test(s)

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Decodes PAYMENT-SIGNATURE (standard base64 of a v2 PaymentPayload with an EIP-3009 authorization). */
export const decodePayment = (header: string): Either.Either<DecodedPayment, string> => {
  let raw: unknown
  try {
    raw = decodePaymentSignatureHeader(header.trim())
  } catch {
    return Either.left("PAYMENT-SIGNATURE is not base64-encoded JSON")
  }
  return decodePaymentPayload(raw)
}

/** Reads a payment as it arrived: PAYMENT-SIGNATURE's base64 text, or the PaymentPayload object of MCP's `_meta`. */
export const readPayment = (proof: PaymentProof): Either.Either<DecodedPayment, string> =>
  proof._tag === "Encoded" ? decodePayment(proof.text) : decodePaymentPayload(proof.value)

/** Decodes a v2 PaymentPayload object with an EIP-3009 authorization (as the MCP transport carries it, or PAYMENT-SIGNATURE's JSON). */
export const decodePaymentPayload = (raw: unknown): Either.Either<DecodedPayment, string> => {
  const parsed = parsePaymentPayload(raw)
  if (!parsed.success) return Either.left(`PAYMENT-SIGNATURE is not an x402 payment payload: ${parsed.error.issues[0]?.message ?? "invalid"}`)
  const data = parsed.data
  if (data.x402Version !== X402_VERSION) return Either.left(`x402 version ${data.x402Version} is not supported; use version 2`)
  const network = data.accepted.network
  if (!isNetwork(network)) return Either.left(`accepted.network "${network}" is not a CAIP-2 network id`)
  const payload: PaymentPayload = {
    x402Version: data.x402Version,
    ...(data.resource ? { resource: data.resource } : {}),
    accepted: { ...data.accepted, network, extra: data.accepted.extra ?? {} },
    payload: data.payload,
    ...(data.extensions ? { extensions: data.extensions } : {})
  }
  const inner = payload.payload
  const auth = inner["authorization"]
  const signature = inner["signature"]
  if (!isRecord(auth) || typeof signature !== "string") {
    return Either.left("the payment is not an EIP-3009 authorization (payload.authorization and payload.signature)")
  }
  const { from, to, value, validAfter, validBefore, nonce } = auth
  if (typeof from !== "string" || !isAddress(from, { strict: false })) return Either.left("authorization.from is not an address")
  if (typeof to !== "string" || !isAddress(to, { strict: false })) return Either.left("authorization.to is not an address")
  if (!decimal(value) || !decimal(validAfter) || !decimal(validBefore)) {
    return Either.left("authorization value, validAfter and validBefore must be decimal strings")
  }
  if (typeof nonce !== "string" || !isHex(nonce) || nonce.length !== 66) return Either.left("authorization.nonce must be 32 bytes of hex")
  if (!isHex(signature)) return Either.left("payload.signature is not hex")
  return Either.right({
    payload,
    authorization: { from: getAddress(from), to: getAddress(to), value, validAfter, validBefore, nonce: nonce.toLowerCase() as Hex },
    signature,
    payer: from.toLowerCase()
  })
}

/** The EIP-712 TransferWithAuthorization the payer signs, in the token's domain. */
const typedAuthorization = (asset: Address, a: Authorization) =>
  ({
    domain: { ...TOKEN_DOMAIN, chainId: CHAIN_ID, verifyingContract: getAddress(asset) },
    types: {
      TransferWithAuthorization: [
        { name: "from", type: "address" },
        { name: "to", type: "address" },
        { name: "value", type: "uint256" },
        { name: "validAfter", type: "uint256" },
        { name: "validBefore", type: "uint256" },
        { name: "nonce", type: "bytes32" }
      ]
    },
    primaryType: "TransferWithAuthorization",
    message: {
      from: a.from,
      to: a.to,
      value: BigInt(a.value),
      validAfter: BigInt(a.validAfter),
      validBefore: BigInt(a.validBefore),
      nonce: a.nonce
    }
  }) as const

/** The EIP-712 hash the payer signed: what identifies the authorization in records, instead of its signature. */
export const authorizationDigest = (asset: Address, a: Authorization): Hex => hashTypedData(typedAuthorization(asset, a))

/** Who signed the authorization (ECDSA recovery in the USDC domain, no RPC); fails on an unreadable signature. */
export const authorizationSigner = (asset: Address, a: Authorization, signature: Hex): Effect.Effect<Address, unknown> =>
  Effect.tryPromise({ try: () => recoverTypedDataAddress({ ...typedAuthorization(asset, a), signature }), catch: (e) => e })

/** The receipt of PAYMENT-RESPONSE: standard base64 of the x402 SettleResponse. */
export const receipt = (r: SettleResponse): string => encodePaymentResponseHeader(r)

export const settledResponse = (transaction: Hex, payer: string): SettleResponse => ({
  success: true,
  transaction,
  network: NETWORK,
  payer: getAddress(payer)
})

/** The receipt of a settlement that failed for good: nothing moved. */
export const failedResponse = (reason: string, payer: string): SettleResponse => ({
  success: false,
  errorReason: reason,
  transaction: "",
  network: NETWORK,
  payer: getAddress(payer)
})

export const pendingResponse = (transaction: Option.Option<Hex>, payer: string): SettleResponse => ({
  success: false,
  errorReason: "settlement_pending",
  transaction: Option.getOrElse(transaction, () => ""),
  network: NETWORK,
  payer: getAddress(payer)
})
