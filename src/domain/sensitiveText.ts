/** What free text from a caller must not carry (keys, secrets, personal data), named by what it is, never quoted. */

interface Finding {
  readonly what: string
  readonly found: (text: string) => boolean
}

const matches = (pattern: RegExp) => (text: string) => pattern.test(text)

/** Grams, kcal, dates and ids are not phone numbers: a phone is written with a +, in the 3-3-4 grouping, or from a leading 0. */
const PHONE_PATTERNS = [
  /\+\d{1,3}[\s.-]?\(?\d{1,4}\)?(?:[\s.-]?\d{2,4}){2,4}(?!\d)/,
  /(?<![\d-])\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}(?![\d-])/,
  /(?<![\d.,-])0\d(?:[\s.-]?\d){8,10}(?![\d.,])/
]

const FINDINGS: ReadonlyArray<Finding> = [
  { what: "a credit key", found: matches(/morsel_(?:live|test)_[0-9a-f]{16,}/i) },
  { what: "a Stripe secret key", found: matches(/\b[sr]k_(?:live|test)_[0-9A-Za-z]{8,}/) },
  { what: "a Stripe webhook secret", found: matches(/\bwhsec_[0-9A-Za-z+/=]{8,}/) },
  { what: "a private key (0x and 64 hex digits)", found: matches(/0x[0-9a-f]{64}(?![0-9a-f])/i) },
  { what: "an e-mail address", found: matches(/[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/) },
  { what: "a phone number", found: (text) => PHONE_PATTERNS.some((p) => p.test(text)) }
]

/** The kinds of secret or personal data found in `text`, in words; empty when there are none. */
export const sensitiveContent = (text: string): ReadonlyArray<string> =>
  FINDINGS.filter((finding) => finding.found(text)).map((finding) => finding.what)

/** "a credit key", "a credit key and an e-mail address", "a, b and c". */
export const listed = (items: ReadonlyArray<string>): string =>
  items.length <= 1 ? (items[0] ?? "") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`
