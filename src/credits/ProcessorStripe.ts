/** The Stripe card processor, through the official SDK; selected when STRIPE_SECRET_KEY is set. */
import { Effect, Layer, Option, Redacted } from "effect"
import type Stripe from "stripe"
import { AppConfig } from "../config.ts"
import { type CardProcessor, InvalidSignature, Processor, ProcessorDisabled, ProcessorError, type ProcessorSession } from "./Processor.ts"
import type { SessionParams } from "./sessionParams.ts"

const classify = (sdk: typeof Stripe, error: unknown): ProcessorError => {
  if (error instanceof sdk.errors.StripeError) {
    const status = error.statusCode
    if (status === 404) return new ProcessorError({ kind: "not_found", message: error.message })
    if (status !== undefined && status >= 400 && status < 500 && status !== 401 && status !== 403 && status !== 429) {
      return new ProcessorError({ kind: "rejected", message: error.message })
    }
    return new ProcessorError({ kind: "unavailable", message: error.message })
  }
  return new ProcessorError({ kind: "unavailable", message: error instanceof Error ? error.message : String(error) })
}

const toSession = (s: Stripe.Checkout.Session): ProcessorSession => {
  const pi = s.payment_intent
  return {
    id: s.id,
    url: s.url,
    status: s.status,
    paymentStatus: s.payment_status,
    mode: s.mode,
    amountTotal: s.amount_total,
    currency: s.currency,
    clientReferenceId: s.client_reference_id,
    metadata: s.metadata ?? {},
    paymentIntentId: pi === null ? null : typeof pi === "string" ? pi : pi.id,
    paymentIntentStatus: pi === null || typeof pi === "string" ? null : pi.status,
    created: s.created
  }
}

/** Copies the saved parameters field by field into the SDK's (mutable) parameter type. */
const toStripeParams = (p: SessionParams): Stripe.Checkout.SessionCreateParams => ({
  mode: p.mode,
  line_items: p.line_items.map((item) => ({
    quantity: item.quantity,
    price_data: {
      currency: item.price_data.currency,
      unit_amount: item.price_data.unit_amount,
      tax_behavior: item.price_data.tax_behavior,
      product_data: { ...item.price_data.product_data }
    }
  })),
  automatic_tax: { ...p.automatic_tax },
  allow_promotion_codes: p.allow_promotion_codes,
  adaptive_pricing: { ...p.adaptive_pricing },
  client_reference_id: p.client_reference_id,
  metadata: { ...p.metadata },
  payment_intent_data: { metadata: { ...p.payment_intent_data.metadata } },
  success_url: p.success_url,
  cancel_url: p.cancel_url,
  expires_at: p.expires_at
})

/** stripe-node options for STRIPE_API_BASE (a local fake in tests); Stripe's own host otherwise. */
export const clientOptions = (apiBase: Option.Option<URL>): Stripe.StripeConfig => ({
  maxNetworkRetries: 2,
  // A processor that accepts and never answers costs a caller three waits: about 20 s in all, not a minute that
  // reverse proxies (nginx: 60 s) cut first. Its calls take well under a second when it is well.
  timeout: 6_000,
  appInfo: { name: "morsel" },
  ...Option.match(apiBase, {
    onNone: () => ({}),
    onSome: (url) => ({
      host: url.hostname,
      port: url.port === "" ? (url.protocol === "http:" ? 80 : 443) : Number(url.port),
      protocol: url.protocol === "http:" ? ("http" as const) : ("https" as const)
    })
  })
})

export const makeStripeProcessor = (sdk: typeof Stripe, settings: {
  readonly secretKey: Redacted.Redacted
  readonly webhookSecret: Redacted.Redacted
  readonly apiBase: Option.Option<URL>
}): CardProcessor => {
  const stripe = new sdk(Redacted.value(settings.secretKey), clientOptions(settings.apiBase))
  const call = <A>(f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: (error) => classify(sdk, error) })
  return {
    enabled: true,
    createSession: (params, idempotencyKey) =>
      call(() => stripe.checkout.sessions.create(toStripeParams(params), { idempotencyKey })).pipe(Effect.map(toSession)),
    retrieveSession: (sessionId) =>
      call(() => stripe.checkout.sessions.retrieve(sessionId, { expand: ["payment_intent"] })).pipe(Effect.map(toSession)),
    listSessions: ({ gte, lte, startingAfter }) =>
      call(() =>
        stripe.checkout.sessions.list({
          created: { gte, lte },
          limit: 100,
          ...Option.match(startingAfter, { onNone: () => ({}), onSome: (id) => ({ starting_after: id }) })
        })
      ).pipe(Effect.map((page) => ({ sessions: page.data.map(toSession), hasMore: page.has_more }))),
    paymentIntentMetadata: (paymentIntentId) =>
      call(() => stripe.paymentIntents.retrieve(paymentIntentId)).pipe(Effect.map((pi) => pi.metadata ?? {})),
    // One pack is one charge: a handful of refunds at most, so the first page of 100 holds them all.
    refundsOfPayment: (paymentIntentId) =>
      call(() => stripe.refunds.list({ payment_intent: paymentIntentId, limit: 100 })).pipe(
        Effect.map((page) => page.data.map((r) => ({ id: r.id, status: r.status })))
      ),
    verifyEvent: (rawBody, signature, receivedAtMs) =>
      Effect.tryPromise({
        try: () =>
          stripe.webhooks.constructEventAsync(
            rawBody,
            signature,
            Redacted.value(settings.webhookSecret),
            undefined,
            undefined,
            receivedAtMs
          ),
        catch: (error) => new InvalidSignature({ message: error instanceof Error ? error.message : "invalid signature" })
      })
  }
}

/** Stripe when STRIPE_SECRET_KEY is set, otherwise the Disabled processor (card credits answer 503). */
export const ProcessorLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Option.match(config.stripe, {
      onNone: () => ProcessorDisabled,
      // The SDK is loaded only when card credits are on (about 4 MiB a server without them does not hold).
      onSome: (settings) =>
        Layer.effect(
          Processor,
          Effect.promise(() => import("stripe")).pipe(Effect.map(({ default: sdk }) => makeStripeProcessor(sdk, settings)))
        )
    })
  )
)
