/**
 * The payment terms a wallet of `morsel/client` signs: SPEC §4.2's exact 0.01 USDC on Base in native USDC, at most
 * the price its caller allowed, in the token the caller pays with. Anything else a server asks is refused unsigned.
 */
import { MorselError } from "./errors.ts"

/** Base mainnet, the one network an analysis is paid on. */
export const BASE_NETWORK = "eip155:8453"
/** Native USDC on Base. */
export const BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
/** What an analysis costs (SPEC §1), the default most a client pays for one. */
export const ANALYSIS_PRICE = "0.01"

/** USDC has 6 decimals: 0.01 USDC is 10000 units. */
const DECIMALS = 6

/** The terms a client pays on: its token and the most it pays for one analysis, in that token's units. */
export interface PaymentTerms {
  readonly asset: string
  readonly maxUnits: bigint
}

/** "0.05" → 50000n; undefined for anything but a positive decimal of at most 6 places. */
export const unitsOf = (price: string): bigint | undefined => {
  const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(price)
  if (match === null) return undefined
  const units = BigInt(match[1] ?? "0") * 10n ** BigInt(DECIMALS) + BigInt((match[2] ?? "").padEnd(DECIMALS, "0"))
  return units > 0n ? units : undefined
}

/** 1000000n → "1", 10000n → "0.01". */
export const priceOf = (units: bigint): string => {
  const whole = units / 10n ** BigInt(DECIMALS)
  const fraction = (units % 10n ** BigInt(DECIMALS)).toString().padStart(DECIMALS, "0").replace(/0+$/, "")
  return fraction === "" ? whole.toString() : `${whole}.${fraction}`
}

/** The client's terms from its options, or a usage error naming the option. */
export const termsOf = (options: { readonly maxPricePerAnalysis?: string | undefined; readonly paymentAsset?: string | undefined }): PaymentTerms => {
  const price = options.maxPricePerAnalysis ?? ANALYSIS_PRICE
  const maxUnits = unitsOf(price)
  if (maxUnits === undefined) {
    throw new MorselError({ code: "usage", message: `maxPricePerAnalysis must be a price in USDC such as "0.05" (more than 0, at most 6 decimals), not ${JSON.stringify(price)}` })
  }
  const asset = options.paymentAsset ?? BASE_USDC
  if (!/^0x[0-9a-fA-F]{40}$/.test(asset)) {
    throw new MorselError({ code: "usage", message: `paymentAsset must be a token's 0x-prefixed 20-byte address, not ${JSON.stringify(asset)}` })
  }
  return { asset, maxUnits }
}

/** One way of paying a server offers (x402 v2 PaymentRequirements, the fields read here). */
export interface Offer {
  readonly scheme: string
  readonly network: string
  readonly asset: string
  readonly amount: string
}

const unitsAsked = (offer: Offer) => (/^\d{1,30}$/.test(offer.amount) ? BigInt(offer.amount) : undefined)

/** Whether an offer is within the terms: exact, on Base, in the client's token, for at most its price. */
export const withinTerms = (terms: PaymentTerms, offer: Offer): boolean => {
  const units = unitsAsked(offer)
  return (
    offer.scheme === "exact" &&
    offer.network === BASE_NETWORK &&
    offer.asset.toLowerCase() === terms.asset.toLowerCase() &&
    units !== undefined &&
    units <= terms.maxUnits
  )
}

/** A server's word as one short printable line: its terms may hold anything. */
const printable = (text: string, max: number) => text.replace(/[^\x20-\x7e]/g, "?").slice(0, max)

const isUsdc = (asset: string) => asset.toLowerCase() === BASE_USDC.toLowerCase()
const tokenWords = (asset: string) => (isUsdc(asset) ? " USDC" : ` of token ${printable(asset, 42)}`)

/** An offer in words: "1 USDC", with what differs from the terms ("0.01 of token 0x… on eip155:1, scheme upto"). */
const inWords = (offer: Offer) => {
  const units = unitsAsked(offer)
  const amount = units === undefined ? `an amount of "${printable(offer.amount, 40)}"` : `${priceOf(units)}${tokenWords(offer.asset)}`
  const where = offer.network === BASE_NETWORK ? "" : ` on ${printable(offer.network, 40)}`
  const scheme = offer.scheme === "exact" ? "" : `, scheme ${printable(offer.scheme, 20)}`
  return `${amount}${where}${scheme}`
}

/** The refusal of a server's terms, before anything is signed: what it asked, what this client pays, and the option. */
export const priceRefused = (terms: PaymentTerms, offers: ReadonlyArray<Offer>) => {
  const asked = offers.length === 0 ? "a payment this client cannot make" : offers.slice(0, 3).map(inWords).join(" or ")
  const pays = `${priceOf(terms.maxUnits)}${tokenWords(terms.asset)}`
  return new MorselError({
    status: 402,
    code: "price_refused",
    message: `the server asks ${asked} per analysis; this client pays at most ${pays} (exact, on Base): nothing was signed. If this server really charges more, allow it with maxPricePerAnalysis`,
    body: { asked: offers, max_price: priceOf(terms.maxUnits), asset: terms.asset }
  })
}
