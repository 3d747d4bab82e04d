/**
 * The morsel client, whatever the platform: analyses (Idempotency-Key per input, `in_progress` waited out,
 * `payment_pending` retried identically), credits and foods. The platform entries (`index.ts` for Node,
 * `browser.ts`) give it their photo preparation.
 */
import { MorselError, refusal, unreachable } from "./errors.ts"
import { termsOf } from "./price.ts"
import type {
  AnalysisResult,
  Balance,
  Checkout,
  CheckoutStatus,
  FeedbackCategory,
  FeedbackReceipt,
  Food,
  FoodSearch,
  Health,
  Language,
  MealText,
  NutritionItem,
  NutritionResult,
  OrderContext,
  PendingAnalysis,
  PreparedPhoto,
  SettlementReceipt
} from "./types.ts"
import type { PayingFetch } from "./x402.ts"

/** A photo: a file path (Node), its bytes, a Blob or a File. Any size; JPEG, PNG, WebP (HEIC where the platform decodes it). */
export type Photo = string | Uint8Array | ArrayBuffer | Blob

export type PhotoPreparer = (photo: Photo) => Promise<PreparedPhoto>

export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:8787` (the sandbox) or `https://morsel.example`. */
  readonly baseUrl: string
  /** A credit key (`morsel_live_…`, `morsel_test_…` in test mode): analyses are paid with card credits. */
  readonly apiKey?: string
  /** A 0x-prefixed private key of a wallet paying 0.01 USDC per analysis over x402. */
  readonly walletPrivateKey?: string
  /**
   * The most the wallet pays for one analysis, in USDC as a decimal string (default "0.01", the service's price).
   * A server asking more, or asking for another token, network or scheme, is refused before anything is signed.
   */
  readonly maxPricePerAnalysis?: string
  /** The token the wallet pays in on Base (default native USDC, 6 decimals); a deployment on its own test token names it. */
  readonly paymentAsset?: string
  /** Sandbox only: the `Sandbox-Scenario` every analysis sends (`payment_pending`, `no_food`, …). */
  readonly scenario?: string
  /** How many times a `payment_pending` answer is retried identically after its Retry-After (default 1). */
  readonly paymentPendingRetries?: number
  /** How long a `409 in_progress` answer is waited out before it is given up, in ms (default 120000). */
  readonly inProgressTimeoutMs?: number
  /** The fetch to use (default: the platform's). */
  readonly fetch?: typeof fetch
  /** How the client waits before a retry (default: a timer); tests pass their own clock. */
  readonly sleep?: (ms: number) => Promise<void>
}

export interface AnalyzeOptions {
  readonly language?: Language
  /** The meal's weighed total (1 to 5000 g, at most two decimals). */
  readonly knownTotalGrams?: number
  /** Default: one made per input and kept by this client, so the same input is never paid twice. */
  readonly idempotencyKey?: string
  /** Sandbox only: `Sandbox-Scenario` for this analysis. */
  readonly scenario?: string
  /** Told what was done to the photo before it is sent. */
  readonly onPhoto?: (photo: PreparedPhoto) => void
}

export interface MorselClient {
  readonly baseUrl: string
  /** SPEC §2.2's result (with the x402 receipt as `receipt`); rejects with a MorselError. */
  readonly analyze: (photo: Photo, options?: AnalyzeOptions) => Promise<AnalysisResult>
  /** The identical retry of an analysis that answered `payment_pending` (`error.pending`): same body, key and authorization. */
  readonly resume: (pending: PendingAnalysis) => Promise<AnalysisResult>
  /** The photo as it would be sent: upright, at most 2048 px a side and 2 MB, JPEG or PNG. */
  readonly preparePhoto: (photo: Photo) => Promise<PreparedPhoto>
  readonly health: () => Promise<Health>
  readonly balance: () => Promise<Balance>
  /** Starts (or, with the same `orderId`, recovers) a checkout of 500 credits; `orderId` defaults to a new UUID. */
  readonly checkout: (options?: { readonly orderId?: string; readonly context?: OrderContext }) => Promise<Checkout>
  readonly confirm: (sessionId: string) => Promise<Balance>
  readonly checkoutStatus: (orderId: string) => Promise<CheckoutStatus>
  readonly feedback: (feedback: { readonly requestId: string; readonly category: FeedbackCategory; readonly note?: string }) => Promise<FeedbackReceipt>
  readonly searchFoods: (query: string, options?: { readonly limit?: number }) => Promise<FoodSearch>
  readonly food: (fdcId: string) => Promise<Food>
  /** Nutrition of named foods (`items`), or of a meal in words (`{ text: "2 eggs and a slice of toast" }`). */
  readonly nutrition: (request: ReadonlyArray<NutritionItem> | MealText, options?: { readonly language?: Language }) => Promise<NutritionResult>
}

const isMealText = (request: ReadonlyArray<NutritionItem> | MealText): request is MealText => !Array.isArray(request)

/** Random hex from the platform's generator (browsers outside a secure context lack randomUUID, not this). */
const randomHex = (bytes: number) => Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("")

/** A version 4 UUID. */
export const uuidV4 = () => {
  const hex = randomHex(16).split("")
  hex[12] = "4"
  hex[16] = "89ab"[Number.parseInt(hex[16] ?? "0", 16) & 3] ?? "8"
  const s = hex.join("")
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`
}

/** A fresh Idempotency-Key (`^[A-Za-z0-9_-]{16,128}$`). */
export const newIdempotencyKey = () => `morsel-${randomHex(16)}`

const toBase64 = (bytes: Uint8Array) => {
  let binary = ""
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary)
}

const fromBase64 = (text: string) => {
  const binary = atob(text)
  return Uint8Array.from(binary, (c) => c.charCodeAt(0))
}

/** A 53-bit hash of an input (cyrb53): enough to tell one client's inputs apart without holding their images. */
const fingerprint = (text: string) => {
  let h1 = 0xdeadbeef
  let h2 = 0x41c6ce57
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    h1 = Math.imul(h1 ^ c, 2654435761)
    h2 = Math.imul(h2 ^ c, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return `${text.length}:${(4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36)}`
}

const parse = (text: string): unknown => {
  try {
    return text === "" ? null : JSON.parse(text)
  } catch {
    return text
  }
}

const retryAfterOf = (response: Response) => {
  const value = Number(response.headers.get("retry-after"))
  return response.headers.has("retry-after") && Number.isFinite(value) ? value : undefined
}

const decodeReceipt = (header: string | null): SettlementReceipt | undefined => {
  if (header === null) return undefined
  const parsed = parse(new TextDecoder().decode(fromBase64(header)))
  return typeof parsed === "object" && parsed !== null ? (parsed as SettlementReceipt) : undefined
}

const WALLET_KEY = /^0x[0-9a-fA-F]{64}$/

export const createClientWith = (options: ClientOptions, prepare: PhotoPreparer): MorselClient => {
  const baseUrl = options.baseUrl.replace(/\/+$/, "")
  const transport: typeof fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  const pendingRetries = options.paymentPendingRetries ?? 1
  const inProgressTimeoutMs = options.inProgressTimeoutMs ?? 120_000
  const apiKey = options.apiKey?.trim()
  const wallet = options.walletPrivateKey?.trim()
  if (apiKey !== undefined && wallet !== undefined) throw new MorselError({ code: "usage", message: "give either apiKey (card credits) or walletPrivateKey (x402), not both" })
  if (wallet !== undefined && !WALLET_KEY.test(wallet)) throw new MorselError({ code: "usage", message: "walletPrivateKey must be a 0x-prefixed 32-byte hex private key" })
  const terms = termsOf(options)
  const bearer = (): Record<string, string> => (apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` })
  let paying: Promise<PayingFetch> | undefined
  const payer = () => {
    if (wallet === undefined) return undefined
    paying ??= import("./x402.ts").then(({ payingFetch }) => payingFetch(wallet as `0x${string}`, transport, terms))
    return paying
  }
  /** Idempotency-Keys made by this client, one per input, so an input sent again replays instead of paying again. */
  const keys = new Map<string, string>()

  const exchange = async (path: string, init: { method: "GET" | "POST"; headers?: Record<string, string>; body?: unknown }, via = transport) => {
    const headers: Record<string, string> = { ...init.headers }
    if (init.body !== undefined) headers["content-type"] = "application/json"
    try {
      const response = await via(`${baseUrl}${path}`, {
        method: init.method,
        headers,
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
      })
      return { response, body: parse(await response.text()) }
    } catch (cause) {
      throw cause instanceof MorselError ? cause : unreachable(baseUrl, cause)
    }
  }

  const call = async <A>(path: string, init: { method: "GET" | "POST"; headers?: Record<string, string>; body?: unknown }): Promise<A> => {
    const { response, body } = await exchange(path, init)
    if (!response.ok) throw refusal(response.status, body, retryAfterOf(response))
    return body as A
  }

  const withKey = <A>(path: string, init: { method: "GET" | "POST"; body?: unknown }): Promise<A> => {
    if (apiKey === undefined) return Promise.reject(new MorselError({ code: "usage", message: `${path} needs a credit key: createClient({ baseUrl, apiKey })` }))
    return call<A>(path, { ...init, headers: bearer() })
  }

  /** One analysis to its end: in_progress waited out, payment_pending retried with the same signed authorization. */
  const send = async (first: PendingAnalysis): Promise<AnalysisResult> => {
    let pending = first
    let retries = 0
    let waited = 0
    for (;;) {
      const headers: Record<string, string> = { ...bearer(), "idempotency-key": pending.idempotencyKey }
      if (pending.scenario !== undefined) headers["sandbox-scenario"] = pending.scenario
      if (pending.paymentSignature !== undefined) headers["payment-signature"] = pending.paymentSignature
      const pay = pending.paymentSignature === undefined ? await payer() : undefined
      const { response, body } = await exchange("/v1/analyze", { method: "POST", headers, body: pending.body }, pay?.fetch)
      const signature = pay?.lastSignature()
      // The signed authorization is part of the request from now on: every retry sends it, never a new one.
      if (signature !== undefined) pending = { ...pending, paymentSignature: signature }
      const retryAfter = retryAfterOf(response)
      if (response.ok) {
        const receipt = decodeReceipt(response.headers.get("payment-response"))
        return receipt === undefined ? (body as AnalysisResult) : { ...(body as AnalysisResult), receipt }
      }
      const error = refusal(response.status, body, retryAfter, pending)
      if (error.code === "in_progress" && waited < inProgressTimeoutMs) {
        const ms = Math.max(250, (retryAfter ?? 1) * 1000)
        waited += ms
        await sleep(ms)
        continue
      }
      if (error.code === "payment_pending" && retries < pendingRetries) {
        retries++
        await sleep((retryAfter ?? 60) * 1000)
        continue
      }
      throw error.code === "payment_pending" ? error : refusal(response.status, body, retryAfter)
    }
  }

  const analyze = async (photo: Photo, given: AnalyzeOptions = {}) => {
    const prepared = await prepare(photo)
    given.onPhoto?.(prepared)
    const body: PendingAnalysis["body"] = {
      image_base64: toBase64(prepared.bytes),
      mime_type: prepared.mime,
      language: given.language ?? "en",
      ...(given.knownTotalGrams === undefined ? {} : { known_total_grams: given.knownTotalGrams })
    }
    const scenario = given.scenario ?? options.scenario
    const input = fingerprint(`${scenario ?? ""}\n${body.mime_type}\n${body.language}\n${body.known_total_grams ?? ""}\n${body.image_base64}`)
    const idempotencyKey = given.idempotencyKey ?? keys.get(input) ?? newIdempotencyKey()
    if (given.idempotencyKey === undefined) keys.set(input, idempotencyKey)
    try {
      return await send({ body, idempotencyKey, ...(scenario === undefined ? {} : { scenario }) })
    } catch (error) {
      // An expired result or a key taken by another input: the next call with this input starts afresh.
      if (error instanceof MorselError && (error.status === 410 || error.code === "idempotency_conflict")) keys.delete(input)
      throw error
    }
  }

  return {
    baseUrl,
    analyze,
    resume: send,
    preparePhoto: prepare,
    health: () => call<Health>("/health", { method: "GET" }),
    balance: () => withKey<Balance>("/v1/credits/balance", { method: "GET" }),
    checkout: (given = {}) =>
      withKey<Checkout>("/v1/credits/checkout", {
        method: "POST",
        body: { order_id: given.orderId ?? uuidV4(), ...(given.context === undefined ? {} : { context: given.context }) }
      }),
    confirm: (sessionId) => withKey<Balance>("/v1/credits/confirm", { method: "POST", body: { session_id: sessionId } }),
    checkoutStatus: (orderId) => withKey<CheckoutStatus>("/v1/credits/checkout-status", { method: "POST", body: { order_id: orderId } }),
    feedback: ({ requestId, category, note }) =>
      withKey<FeedbackReceipt>("/v1/credits/feedback", {
        method: "POST",
        body: { request_id: requestId, category, ...(note === undefined ? {} : { note }) }
      }),
    searchFoods: (query, given = {}) =>
      call<FoodSearch>(`/v1/foods?${new URLSearchParams({ q: query, ...(given.limit === undefined ? {} : { limit: String(given.limit) }) })}`, {
        method: "GET",
        headers: bearer()
      }),
    food: (fdcId) => call<Food>(`/v1/foods/${encodeURIComponent(fdcId)}`, { method: "GET", headers: bearer() }),
    nutrition: (request, given = {}) =>
      call<NutritionResult>("/v1/nutrition", {
        method: "POST",
        headers: bearer(),
        body: { ...(isMealText(request) ? { text: request.text } : { items: request }), ...(given.language === undefined ? {} : { language: given.language }) }
      })
  }
}
