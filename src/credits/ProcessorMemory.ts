/**
 * The in-memory card processor: Stripe's rules on the state of cards.ts, with `cs_test_…` sessions paid on the
 * service's own checkout page and webhook events signed as Stripe signs them, so they take the same way in.
 */
import { randomBytes } from "node:crypto"
import { Clock, Context, Effect, Layer, Option } from "effect"
import Stripe from "stripe"
import { AppConfig } from "../config.ts"
import { type CardSession, type Cards, type Json, makeCards } from "./cards.ts"
import { type CardProcessor, InvalidSignature, Processor, ProcessorError, type ProcessorSession } from "./Processor.ts"

/** The state and controls of the in-memory processor: pay, refund, dispute, expire, and outages for tests. */
export interface MemoryCardsControls {
  readonly cards: Cards
  /** The processor's clock (Effect's Clock, so TestClock moves it), in unix seconds. */
  readonly nowSeconds: Effect.Effect<number>
  /** The next `n` processor calls fail as unavailable. */
  readonly failNext: (n: number) => void
  /** How often each processor call was made. */
  readonly calls: { create: number; retrieve: number; list: number; paymentIntent: number; refunds: number }
  /** The body and `Stripe-Signature` header of an event, as Stripe would deliver it now. */
  readonly sign: (event: Json) => Effect.Effect<{ readonly body: string; readonly signature: string }>
}

export class MemoryCards extends Context.Tag("morsel/credits/MemoryCards")<MemoryCards, MemoryCardsControls>() {}

const nowSeconds = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

const toSession = (s: CardSession, url: string | null): ProcessorSession => ({
  id: s.id,
  url,
  status: s.status,
  paymentStatus: s.payment_status,
  mode: s.mode,
  amountTotal: s.amount_total,
  currency: s.currency,
  clientReferenceId: s.client_reference_id,
  metadata: s.metadata,
  paymentIntentId: s.payment_intent?.id ?? null,
  paymentIntentStatus: s.payment_intent?.status ?? null,
  created: s.created
})

/** The in-memory processor and its controls; sessions are paid at `{PUBLIC_BASE_URL}/sandbox/checkout/{id}`. */
export const makeMemoryProcessor = (publicBaseUrl: string): { readonly processor: CardProcessor; readonly controls: MemoryCardsControls } => {
  const checkoutUrl = (id: string) => `${publicBaseUrl}/sandbox/checkout/${id}`
  const cards = makeCards({ live: false, checkoutUrl })
  const webhookSecret = `whsec_${randomBytes(24).toString("hex")}`
  const calls = { create: 0, retrieve: 0, list: 0, paymentIntent: 0, refunds: 0 }
  let down = 0

  /** Counts the call, fails it during an outage, then runs it at the processor's clock. */
  const call = <A>(name: keyof typeof calls, f: (now: number) => A | ProcessorError): Effect.Effect<A, ProcessorError> =>
    Effect.flatMap(nowSeconds, (now) => {
      calls[name]++
      if (down > 0) {
        down--
        return Effect.fail(new ProcessorError({ kind: "unavailable", message: "in-memory processor outage" }))
      }
      const result = f(now)
      return result instanceof ProcessorError ? Effect.fail(result) : Effect.succeed(result)
    })

  const notFound = (what: string) => new ProcessorError({ kind: "not_found", message: `No such ${what}` })
  const sessionOf = (s: CardSession) => toSession(s, s.status === "open" ? checkoutUrl(s.id) : null)

  const processor: CardProcessor = {
    enabled: true,
    createSession: (params, idempotencyKey) =>
      call("create", (now) => {
        const item = params.line_items[0]
        const created = cards.create(
          {
            mode: params.mode,
            amountTotal: item.price_data.unit_amount * item.quantity,
            currency: item.price_data.currency,
            clientReferenceId: params.client_reference_id,
            metadata: params.metadata,
            intentMetadata: params.payment_intent_data.metadata,
            successUrl: params.success_url,
            cancelUrl: params.cancel_url,
            expiresAt: params.expires_at
          },
          now,
          { key: idempotencyKey, digest: JSON.stringify(params) }
        )
        return created._tag === "IdempotencyConflict"
          ? new ProcessorError({ kind: "rejected", message: "Keys for idempotent requests can only be used with the same parameters." })
          : sessionOf(created.session)
      }),
    retrieveSession: (sessionId) =>
      call("retrieve", (now) => {
        const s = cards.find(sessionId, now)
        return s === undefined ? notFound("checkout.session") : sessionOf(s)
      }),
    listSessions: ({ gte, lte, startingAfter }) =>
      call("list", (now) => {
        const page = cards.list({ gte, lte, limit: 100, ...Option.match(startingAfter, { onNone: () => ({}), onSome: (id) => ({ startingAfter: id }) }) }, now)
        return { sessions: page.data.map(sessionOf), hasMore: page.hasMore }
      }),
    paymentIntentMetadata: (paymentIntentId) =>
      call("paymentIntent", () => cards.intentById(paymentIntentId)?.metadata ?? notFound("payment_intent")),
    refundsOfPayment: (paymentIntentId) =>
      call("refunds", () => cards.refundsOf(paymentIntentId).map((r) => ({ id: r.id, status: r.status }))),
    verifyEvent: (rawBody, signature, receivedAtMs) =>
      Effect.tryPromise({
        try: () => Stripe.webhooks.constructEventAsync(rawBody, signature, webhookSecret, undefined, undefined, receivedAtMs),
        catch: (error) => new InvalidSignature({ message: error instanceof Error ? error.message : "invalid signature" })
      })
  }

  const controls: MemoryCardsControls = {
    cards,
    nowSeconds,
    failNext: (n) => {
      down = n
    },
    calls,
    sign: (event) =>
      Effect.map(nowSeconds, (timestamp) => {
        const body = JSON.stringify(event)
        return { body, signature: Stripe.webhooks.generateTestHeaderString({ payload: body, secret: webhookSecret, timestamp }) }
      })
  }
  return { processor, controls }
}

/** The in-memory processor as `Processor`, with its controls as `MemoryCards`; needs AppConfig (PUBLIC_BASE_URL). */
export const ProcessorMemory: Layer.Layer<Processor | MemoryCards, never, AppConfig> = Layer.effectContext(
  Effect.map(AppConfig, (config) => {
    const { processor, controls } = makeMemoryProcessor(config.publicBaseUrl)
    return Context.make(Processor, processor).pipe(Context.add(MemoryCards, controls))
  })
)
