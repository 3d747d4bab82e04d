/**
 * An in-memory card processor with Stripe's objects and rules: checkout sessions, payment intents, refunds and
 * disputes, the session listing, and the webhook events Stripe would send, in Stripe's JSON shape. It is the state
 * behind the in-memory processor and behind the tests' fake Stripe API, so both tell the same story.
 */
import { randomBytes } from "node:crypto"

export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

export interface CardPaymentIntent {
  id: string
  status: "processing" | "succeeded" | "requires_payment_method"
  metadata: Record<string, string>
  charge: string
}

export interface CardSession {
  id: string
  created: number
  expires_at: number
  status: "open" | "complete" | "expired"
  payment_status: "paid" | "unpaid"
  mode: string
  amount_total: number
  currency: string
  client_reference_id: string | null
  metadata: Record<string, string>
  payment_intent: CardPaymentIntent | null
  /** Metadata requested for the payment intent (payment_intent_data.metadata), applied when it is created. */
  intent_metadata: Record<string, string>
  success_url: string
  cancel_url: string
  /** Creation order, to sort sessions created in the same second. */
  seq: number
}

export type RefundStatus = "pending" | "requires_action" | "succeeded" | "failed" | "canceled"
export type DisputeStatus =
  | "warning_needs_response"
  | "warning_under_review"
  | "warning_closed"
  | "needs_response"
  | "under_review"
  | "won"
  | "lost"

export interface CardRefund {
  id: string
  payment_intent: string
  charge: string
  status: RefundStatus
  created: number
}

export interface CardDispute {
  id: string
  payment_intent: string
  charge: string
  status: DisputeStatus
  created: number
}

export interface SessionInput {
  readonly mode: string
  readonly amountTotal: number
  readonly currency: string
  readonly clientReferenceId: string | null
  readonly metadata: Record<string, string>
  readonly intentMetadata: Record<string, string>
  readonly successUrl: string
  readonly cancelUrl: string
  readonly expiresAt: number
}

export type CreateOutcome =
  | { readonly _tag: "Created" | "Replayed"; readonly session: CardSession }
  | { readonly _tag: "IdempotencyConflict" }

const token = (bytes: number) => randomBytes(bytes).toString("hex")

export const makeCards = (options: { readonly live: boolean; readonly checkoutUrl: (sessionId: string) => string }) => {
  const sessions = new Map<string, CardSession>()
  const refunds = new Map<string, CardRefund>()
  const disputes = new Map<string, CardDispute>()
  const idempotency = new Map<string, { readonly digest: string; readonly sessionId: string }>()
  let seq = 0

  /** Stripe expires an open session at its expires_at. */
  const current = (s: CardSession, now: number) => {
    if (s.status === "open" && now >= s.expires_at) s.status = "expired"
    return s
  }

  const find = (sessionId: string, now: number) => {
    const s = sessions.get(sessionId)
    return s === undefined ? undefined : current(s, now)
  }

  const get = (sessionId: string) => {
    const s = sessions.get(sessionId)
    if (s === undefined) throw new Error(`no checkout session ${sessionId}`)
    return s
  }

  const insert = (input: SessionInput, now: number): CardSession => {
    const s: CardSession = {
      id: `${options.live ? "cs_live_" : "cs_test_"}${token(12)}`,
      created: now,
      expires_at: input.expiresAt,
      status: "open",
      payment_status: "unpaid",
      mode: input.mode,
      amount_total: input.amountTotal,
      currency: input.currency,
      client_reference_id: input.clientReferenceId,
      metadata: { ...input.metadata },
      payment_intent: null,
      intent_metadata: { ...input.intentMetadata },
      success_url: input.successUrl,
      cancel_url: input.cancelUrl,
      seq: seq++
    }
    sessions.set(s.id, s)
    return s
  }

  /** A create under an idempotency key is replayed for the same parameters (`digest`) and refused for others. */
  const create = (input: SessionInput, now: number, key?: { readonly key: string; readonly digest: string }): CreateOutcome => {
    if (key !== undefined) {
      const seen = idempotency.get(key.key)
      if (seen !== undefined) {
        return seen.digest === key.digest ? { _tag: "Replayed", session: get(seen.sessionId) } : { _tag: "IdempotencyConflict" }
      }
    }
    const session = insert(input, now)
    if (key !== undefined) idempotency.set(key.key, { digest: key.digest, sessionId: session.id })
    return { _tag: "Created", session }
  }

  /** Sessions created in [gte, lte], newest first, `limit` per page after `startingAfter`. */
  const list = (q: { readonly gte?: number; readonly lte?: number; readonly limit: number; readonly startingAfter?: string }, now: number) => {
    let all = [...sessions.values()]
      .filter((s) => (q.gte === undefined || s.created >= q.gte) && (q.lte === undefined || s.created <= q.lte))
      .sort((a, b) => b.created - a.created || b.seq - a.seq)
    if (q.startingAfter !== undefined) {
      const i = all.findIndex((s) => s.id === q.startingAfter)
      all = i === -1 ? [] : all.slice(i + 1)
    }
    return { data: all.slice(0, q.limit).map((s) => current(s, now)), hasMore: all.length > q.limit }
  }

  const intentById = (paymentIntentId: string) =>
    [...sessions.values()].find((s) => s.payment_intent?.id === paymentIntentId)?.payment_intent ?? undefined

  const refundsOf = (paymentIntentId: string) => [...refunds.values()].filter((r) => r.payment_intent === paymentIntentId)

  const ensureIntent = (s: CardSession, status: CardPaymentIntent["status"]) => {
    s.payment_intent ??= { id: `pi_${token(12)}`, status, metadata: { ...s.intent_metadata }, charge: `ch_${token(12)}` }
    s.payment_intent.status = status
    return s.payment_intent
  }

  const intentOf = (sessionId: string) => {
    const intent = get(sessionId).payment_intent
    if (intent === null) throw new Error(`checkout session ${sessionId} has no payment`)
    return intent
  }

  const refundById = (refundId: string) => {
    const r = refunds.get(refundId)
    if (r === undefined) throw new Error(`no refund ${refundId}`)
    return r
  }

  const disputeById = (disputeId: string) => {
    const d = disputes.get(disputeId)
    if (d === undefined) throw new Error(`no dispute ${disputeId}`)
    return d
  }

  const json = {
    intent: (pi: CardPaymentIntent): Json => ({
      id: pi.id,
      object: "payment_intent",
      amount: 500,
      currency: "usd",
      status: pi.status,
      metadata: pi.metadata,
      latest_charge: pi.charge,
      livemode: options.live
    }),
    session: (s: CardSession, expandIntent: boolean): Json => ({
      id: s.id,
      object: "checkout.session",
      url: s.status === "open" ? options.checkoutUrl(s.id) : null,
      status: s.status,
      payment_status: s.payment_status,
      mode: s.mode,
      amount_total: s.amount_total,
      amount_subtotal: s.amount_total,
      currency: s.currency,
      client_reference_id: s.client_reference_id,
      metadata: s.metadata,
      payment_intent: s.payment_intent === null ? null : expandIntent ? json.intent(s.payment_intent) : s.payment_intent.id,
      created: s.created,
      expires_at: s.expires_at,
      success_url: s.success_url,
      cancel_url: s.cancel_url,
      livemode: options.live
    }),
    refund: (r: CardRefund): Json => ({
      id: r.id,
      object: "refund",
      amount: 500,
      currency: "usd",
      charge: r.charge,
      payment_intent: r.payment_intent,
      status: r.status,
      created: r.created,
      metadata: {}
    }),
    dispute: (d: CardDispute): Json => ({
      id: d.id,
      object: "dispute",
      amount: 500,
      currency: "usd",
      charge: d.charge,
      payment_intent: d.payment_intent,
      status: d.status,
      reason: "fraudulent",
      created: d.created,
      metadata: {}
    }),
    /** Charges carry no order metadata, so a receiver finds the order through the payment intent. */
    charge: (sessionId: string): Json => {
      const intent = intentOf(sessionId)
      const refunded = refundsOf(intent.id).filter((r) => r.status !== "failed" && r.status !== "canceled").length > 0
      return {
        id: intent.charge,
        object: "charge",
        amount: 500,
        amount_refunded: refunded ? 500 : 0,
        refunded,
        payment_intent: intent.id,
        metadata: {}
      }
    }
  }

  const event = (type: string, object: Json, now: number): Json => ({
    id: `evt_${token(12)}`,
    object: "event",
    api_version: "2026-10-28",
    created: now,
    data: { object },
    livemode: options.live,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type
  })

  const sessionEvent = (type: string) => (sessionId: string, now: number) => event(type, json.session(get(sessionId), false), now)
  const refundEvent = (type: string) => (refundId: string, now: number) => event(type, json.refund(refundById(refundId)), now)
  const disputeEvent = (type: string) => (disputeId: string, now: number) => event(type, json.dispute(disputeById(disputeId)), now)

  return {
    sessions,
    refunds,
    disputes,
    create,
    find,
    get,
    list,
    intentById,
    refundsOf,
    /** The cardholder pays by card: the session completes paid. */
    pay: (sessionId: string) => {
      const s = get(sessionId)
      s.status = "complete"
      s.payment_status = "paid"
      ensureIntent(s, "succeeded")
      return s
    },
    /** A delayed method: the session completes unpaid and the payment is processing. */
    payAsync: (sessionId: string) => {
      const s = get(sessionId)
      s.status = "complete"
      s.payment_status = "unpaid"
      ensureIntent(s, "processing")
      return s
    },
    asyncSucceeds: (sessionId: string) => {
      const s = get(sessionId)
      s.payment_status = "paid"
      ensureIntent(s, "succeeded")
      return s
    },
    asyncFails: (sessionId: string) => {
      const s = get(sessionId)
      ensureIntent(s, "requires_payment_method")
      return s
    },
    expire: (sessionId: string) => {
      const s = get(sessionId)
      if (s.status === "open") s.status = "expired"
      return s
    },
    /** Refunds the session's payment in full. */
    refund: (sessionId: string, status: RefundStatus, now: number): CardRefund => {
      const intent = intentOf(sessionId)
      const r: CardRefund = { id: `re_${token(12)}`, payment_intent: intent.id, charge: intent.charge, status, created: now }
      refunds.set(r.id, r)
      return r
    },
    updateRefund: (refundId: string, status: RefundStatus) => {
      const r = refundById(refundId)
      r.status = status
      return r
    },
    /** The cardholder disputes the session's payment. */
    dispute: (sessionId: string, status: DisputeStatus, now: number): CardDispute => {
      const intent = intentOf(sessionId)
      const d: CardDispute = { id: `dp_${token(12)}`, payment_intent: intent.id, charge: intent.charge, status, created: now }
      disputes.set(d.id, d)
      return d
    },
    updateDispute: (disputeId: string, status: DisputeStatus) => {
      const d = disputeById(disputeId)
      d.status = status
      return d
    },
    /** Sessions of other orders, to make listings long. */
    seedSessions: (n: number, created: number) => {
      for (let i = 0; i < n; i++) {
        const orderId = crypto.randomUUID()
        insert(
          {
            mode: "payment",
            amountTotal: 500,
            currency: "usd",
            clientReferenceId: orderId,
            metadata: { order_id: orderId },
            intentMetadata: {},
            successUrl: "",
            cancelUrl: "",
            expiresAt: created + 23 * 3600
          },
          created
        )
      }
    },
    json,
    /** Event payloads as Stripe sends them, with each object as it stands now. */
    events: {
      completed: sessionEvent("checkout.session.completed"),
      asyncSucceeded: sessionEvent("checkout.session.async_payment_succeeded"),
      asyncFailed: sessionEvent("checkout.session.async_payment_failed"),
      expired: sessionEvent("checkout.session.expired"),
      chargeRefunded: (sessionId: string, now: number) => event("charge.refunded", json.charge(sessionId), now),
      refundCreated: refundEvent("refund.created"),
      refundUpdated: refundEvent("refund.updated"),
      refundFailed: refundEvent("refund.failed"),
      disputeCreated: disputeEvent("charge.dispute.created"),
      disputeUpdated: disputeEvent("charge.dispute.updated"),
      disputeClosed: disputeEvent("charge.dispute.closed")
    }
  }
}

export type Cards = ReturnType<typeof makeCards>
