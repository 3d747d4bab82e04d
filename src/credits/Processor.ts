/** The card processor (Stripe, through the official SDK): checkout sessions, payment intents, webhook events. */
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import Stripe from "stripe"
import { AppConfig } from "../config.ts"

/** `unavailable`: retry later (network, 5xx, rate limit, auth); `not_found`: no such object; `rejected`: a 4xx. */
export class ProcessorError extends Data.TaggedError("ProcessorError")<{
  readonly kind: "unavailable" | "not_found" | "rejected"
  readonly message: string
}> {}

export class InvalidSignature extends Data.TaggedError("InvalidSignature")<{ readonly message: string }> {}

/** The parts of a checkout session the credits feature reads. */
export interface ProcessorSession {
  readonly id: string
  readonly url: string | null
  /** open, complete or expired */
  readonly status: string | null
  /** paid, unpaid or no_payment_required */
  readonly paymentStatus: string
  readonly mode: string
  readonly amountTotal: number | null
  readonly currency: string | null
  readonly clientReferenceId: string | null
  readonly metadata: Readonly<Record<string, string>>
  readonly paymentIntentId: string | null
  /** Status of the expanded payment intent, when there is one (async methods: processing, succeeded, …). */
  readonly paymentIntentStatus: string | null
  readonly created: number
}

export interface SessionPage {
  readonly sessions: ReadonlyArray<ProcessorSession>
  readonly hasMore: boolean
}

export interface Gateway {
  readonly createSession: (
    params: Stripe.Checkout.SessionCreateParams,
    idempotencyKey: string
  ) => Effect.Effect<ProcessorSession, ProcessorError>
  readonly retrieveSession: (sessionId: string) => Effect.Effect<ProcessorSession, ProcessorError>
  /** One page of sessions created in [gte, lte] (unix seconds), newest first, 100 per page. */
  readonly listSessions: (range: {
    readonly gte: number
    readonly lte: number
    readonly startingAfter: Option.Option<string>
  }) => Effect.Effect<SessionPage, ProcessorError>
  readonly paymentIntentMetadata: (paymentIntentId: string) => Effect.Effect<Readonly<Record<string, string>>, ProcessorError>
  /** Verifies the `Stripe-Signature` header on the unparsed body and parses the event. */
  readonly verifyEvent: (rawBody: string, signature: string, receivedAtMs: number) => Effect.Effect<Stripe.Event, InvalidSignature>
}

const classify = (error: unknown): ProcessorError => {
  if (error instanceof Stripe.errors.StripeError) {
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

/** stripe-node options for STRIPE_API_BASE (a local fake in tests); Stripe's own host otherwise. */
export const clientOptions = (apiBase: Option.Option<URL>): Stripe.StripeConfig => ({
  maxNetworkRetries: 2,
  timeout: 20_000,
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

export const makeGateway = (settings: {
  readonly secretKey: Redacted.Redacted
  readonly webhookSecret: Redacted.Redacted
  readonly apiBase: Option.Option<URL>
}): Gateway => {
  const stripe = new Stripe(Redacted.value(settings.secretKey), clientOptions(settings.apiBase))
  const call = <A>(f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: classify })
  return {
    createSession: (params, idempotencyKey) =>
      call(() => stripe.checkout.sessions.create(params, { idempotencyKey })).pipe(Effect.map(toSession)),
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

/** The processor, or None when STRIPE_SECRET_KEY is unset (card credits answer 503 payments_unavailable). */
export class Processor extends Context.Tag("morsel/credits/Processor")<Processor, Option.Option<Gateway>>() {
  static readonly layer = Layer.effect(
    Processor,
    Effect.map(AppConfig, (config) => Option.map(config.stripe, makeGateway))
  )
}
