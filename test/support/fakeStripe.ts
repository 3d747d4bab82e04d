/** A small stateful Stripe API on 127.0.0.1 for the real `stripe` SDK: checkout sessions, payment intents, webhooks. */
import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import Stripe from "stripe"
import { closeServer, readBody } from "./http.ts"

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }
type Form = { [key: string]: Form | string }

export interface FakeSession {
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
  payment_intent: FakePaymentIntent | null
  /** Metadata requested for the payment intent (payment_intent_data.metadata), applied when it is created. */
  intent_metadata: Record<string, string>
  success_url: string
  cancel_url: string
  /** The create parameters as sent, for assertions. */
  params: Form
  seq: number
}

export interface FakePaymentIntent {
  id: string
  status: "processing" | "succeeded" | "requires_payment_method"
  metadata: Record<string, string>
  charge: string
}

export interface WebhookDelivery {
  readonly status: number
  readonly body: string
}

const alnum = (bytes: number) => randomBytes(bytes).toString("hex")

/** Parses stripe-node's `a[b][0][c]=v` form encoding into nested records. */
export const parseForm = (body: string): Form => {
  const root: Form = {}
  for (const pair of body.split("&")) {
    if (pair === "") continue
    const [rawKey = "", rawValue = ""] = pair.split("=")
    const key = decodeURIComponent(rawKey.replace(/\+/g, " "))
    const value = decodeURIComponent(rawValue.replace(/\+/g, " "))
    const path = key.split(/\[|\]\[|\]/).filter((s) => s !== "")
    let node: Form = root
    path.forEach((segment, i) => {
      if (i === path.length - 1) {
        node[segment] = value
      } else {
        const next = node[segment]
        if (typeof next === "object") {
          node = next
        } else {
          const created: Form = {}
          node[segment] = created
          node = created
        }
      }
    })
  }
  return root
}

const at = (form: Form | string | undefined, ...path: ReadonlyArray<string>): Form | string | undefined => {
  let node = form
  for (const segment of path) {
    if (node === undefined || typeof node === "string") return undefined
    node = node[segment]
  }
  return node
}
const str = (form: Form | string | undefined, ...path: ReadonlyArray<string>) => {
  const v = at(form, ...path)
  return typeof v === "string" ? v : undefined
}
const record = (form: Form | string | undefined, ...path: ReadonlyArray<string>): Record<string, string> => {
  const v = at(form, ...path)
  const out: Record<string, string> = {}
  if (v !== undefined && typeof v !== "string") for (const [k, x] of Object.entries(v)) if (typeof x === "string") out[k] = x
  return out
}

export interface FakeStripeOptions {
  /** `sk_test_…` (sessions `cs_test_…`) or `sk_live_…` (sessions `cs_live_…`). */
  readonly secretKey?: string
}

export const startFakeStripe = async (options: FakeStripeOptions = {}) => {
  const secretKey = options.secretKey ?? "sk_test_fake_morsel"
  const live = secretKey.startsWith("sk_live_")
  const webhookSecret = `whsec_${alnum(16)}`
  const signer = new Stripe(secretKey)
  const sessions = new Map<string, FakeSession>()
  const idempotency = new Map<string, { body: string; status: number; response: string }>()
  let seq = 0
  let clockSeconds: number | undefined
  let downFor = 0
  const calls = { create: 0, createReplayed: 0, retrieve: 0, list: 0, expire: 0, paymentIntent: 0 }

  const now = () => clockSeconds ?? Math.floor(Date.now() / 1000)
  let baseUrl = ""

  const intentJson = (pi: FakePaymentIntent): Json => ({
    id: pi.id,
    object: "payment_intent",
    amount: 500,
    currency: "usd",
    status: pi.status,
    metadata: pi.metadata,
    latest_charge: pi.charge,
    livemode: live
  })

  const sessionJson = (s: FakeSession, expandIntent: boolean): Json => ({
    id: s.id,
    object: "checkout.session",
    url: s.status === "open" ? `${baseUrl}/pay/${s.id}` : null,
    status: s.status,
    payment_status: s.payment_status,
    mode: s.mode,
    amount_total: s.amount_total,
    amount_subtotal: s.amount_total,
    currency: s.currency,
    client_reference_id: s.client_reference_id,
    metadata: s.metadata,
    payment_intent: s.payment_intent === null ? null : expandIntent ? intentJson(s.payment_intent) : s.payment_intent.id,
    created: s.created,
    expires_at: s.expires_at,
    success_url: s.success_url,
    cancel_url: s.cancel_url,
    livemode: live
  })

  const send = (res: ServerResponse, status: number, body: Json) => {
    const text = JSON.stringify(body)
    res.writeHead(status, { "content-type": "application/json", "request-id": `req_${alnum(6)}` })
    res.end(text)
    return text
  }
  const missing = (res: ServerResponse, what: string) =>
    send(res, 404, { error: { type: "invalid_request_error", code: "resource_missing", message: `No such ${what}` } })

  const createSession = (form: Form): FakeSession => {
    const unitAmount = Number(str(form, "line_items", "0", "price_data", "unit_amount") ?? "0")
    const quantity = Number(str(form, "line_items", "0", "quantity") ?? "1")
    const s: FakeSession = {
      id: `${live ? "cs_live_" : "cs_test_"}${alnum(12)}`,
      created: now(),
      expires_at: Number(str(form, "expires_at") ?? String(now() + 24 * 3600)),
      status: "open",
      payment_status: "unpaid",
      mode: str(form, "mode") ?? "payment",
      amount_total: unitAmount * quantity,
      currency: str(form, "line_items", "0", "price_data", "currency") ?? "usd",
      client_reference_id: str(form, "client_reference_id") ?? null,
      metadata: record(form, "metadata"),
      payment_intent: null,
      intent_metadata: record(form, "payment_intent_data", "metadata"),
      success_url: str(form, "success_url") ?? "",
      cancel_url: str(form, "cancel_url") ?? "",
      params: form,
      seq: seq++
    }
    sessions.set(s.id, s)
    return s
  }

  const handle = (req: IncomingMessage, res: ServerResponse, body: string) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1")
    const path = url.pathname
    if (downFor > 0) {
      downFor--
      return send(res, 500, { error: { type: "api_error", message: "fake outage" } })
    }
    if (req.method === "POST" && path === "/v1/checkout/sessions") {
      calls.create++
      const key = req.headers["idempotency-key"]
      const idemKey = typeof key === "string" ? key : undefined
      if (idemKey !== undefined) {
        const seen = idempotency.get(idemKey)
        if (seen !== undefined) {
          if (seen.body !== body) {
            return send(res, 400, {
              error: {
                type: "idempotency_error",
                message: "Keys for idempotent requests can only be used with the same parameters they were first used with."
              }
            })
          }
          calls.createReplayed++
          res.writeHead(seen.status, { "content-type": "application/json", "idempotent-replayed": "true" })
          return res.end(seen.response)
        }
      }
      const form = parseForm(body)
      if (str(form, "mode") !== "payment" || at(form, "line_items") === undefined) {
        return send(res, 400, { error: { type: "invalid_request_error", message: "mode and line_items are required" } })
      }
      const s = createSession(form)
      const text = send(res, 200, sessionJson(s, false))
      if (idemKey !== undefined) idempotency.set(idemKey, { body, status: 200, response: text })
      return
    }
    const expire = /^\/v1\/checkout\/sessions\/([^/]+)\/expire$/.exec(path)
    if (req.method === "POST" && expire?.[1] !== undefined) {
      calls.expire++
      const s = sessions.get(expire[1])
      if (s === undefined) return missing(res, "checkout.session")
      if (s.status === "open") s.status = "expired"
      return send(res, 200, sessionJson(s, false))
    }
    const one = /^\/v1\/checkout\/sessions\/([^/]+)$/.exec(path)
    if (req.method === "GET" && one?.[1] !== undefined) {
      calls.retrieve++
      const s = sessions.get(one[1])
      if (s === undefined) return missing(res, "checkout.session")
      const expand = [...url.searchParams.entries()].some(([k, v]) => k.startsWith("expand") && v === "payment_intent")
      return send(res, 200, sessionJson(s, expand))
    }
    if (req.method === "GET" && path === "/v1/checkout/sessions") {
      calls.list++
      const q = url.searchParams
      const gte = q.get("created[gte]")
      const lte = q.get("created[lte]")
      const limit = Math.min(100, Number(q.get("limit") ?? "10"))
      const startingAfter = q.get("starting_after")
      let list = [...sessions.values()]
        .filter((s) => (gte === null || s.created >= Number(gte)) && (lte === null || s.created <= Number(lte)))
        .sort((a, b) => b.created - a.created || b.seq - a.seq)
      if (startingAfter !== null) {
        const i = list.findIndex((s) => s.id === startingAfter)
        list = i === -1 ? [] : list.slice(i + 1)
      }
      const data = list.slice(0, limit)
      return send(res, 200, {
        object: "list",
        url: "/v1/checkout/sessions",
        has_more: list.length > limit,
        data: data.map((s) => sessionJson(s, false))
      })
    }
    const pi = /^\/v1\/payment_intents\/([^/]+)$/.exec(path)
    if (req.method === "GET" && pi?.[1] !== undefined) {
      calls.paymentIntent++
      const s = [...sessions.values()].find((x) => x.payment_intent?.id === pi[1])
      if (s?.payment_intent == null) return missing(res, "payment_intent")
      return send(res, 200, intentJson(s.payment_intent))
    }
    return send(res, 404, { error: { type: "invalid_request_error", message: `Unrecognized request URL (${req.method} ${path})` } })
  }

  const server = createServer((req, res) => {
    void readBody(req).then((body) => handle(req, res, body))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  baseUrl = `http://127.0.0.1:${port}`

  const get = (sessionId: string) => {
    const s = sessions.get(sessionId)
    if (s === undefined) throw new Error(`fake stripe: no session ${sessionId}`)
    return s
  }
  const ensureIntent = (s: FakeSession, status: FakePaymentIntent["status"]) => {
    s.payment_intent ??= { id: `pi_${alnum(12)}`, status, metadata: { ...s.intent_metadata }, charge: `ch_${alnum(12)}` }
    s.payment_intent.status = status
    return s.payment_intent
  }
  const intentOf = (sessionId: string) => {
    const intent = get(sessionId).payment_intent
    if (intent === null) throw new Error(`fake stripe: session ${sessionId} has no payment`)
    return intent
  }

  const event = (type: string, object: Json): Json => ({
    id: `evt_${alnum(12)}`,
    object: "event",
    api_version: Stripe.API_VERSION,
    created: now(),
    data: { object },
    livemode: live,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type
  })

  return {
    url: baseUrl,
    secretKey,
    webhookSecret,
    calls,
    sessions,
    /** The env a morsel server needs to talk to this fake. */
    env: { STRIPE_SECRET_KEY: secretKey, STRIPE_WEBHOOK_SECRET: webhookSecret, STRIPE_API_BASE: baseUrl },
    /** Pins the fake's clock (unix seconds) for `created` stamps; undefined returns to real time. */
    setNow: (seconds: number | undefined) => {
      clockSeconds = seconds
    },
    /** The next `n` API calls answer 500. */
    failNext: (n: number) => {
      downFor = n
    },
    session: get,
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
    /** Sessions of other orders, `created` at the fake's clock, to make listings long. */
    seedSessions: (n: number, created?: number) => {
      for (let i = 0; i < n; i++) {
        const s = createSession(parseForm("mode=payment&line_items[0][price_data][unit_amount]=500&line_items[0][quantity]=1"))
        s.client_reference_id = crypto.randomUUID()
        s.metadata = { order_id: s.client_reference_id }
        if (created !== undefined) s.created = created
      }
    },
    /** Event payloads as Stripe sends them. */
    events: {
      completed: (sessionId: string) => event("checkout.session.completed", sessionJson(get(sessionId), false)),
      asyncSucceeded: (sessionId: string) => event("checkout.session.async_payment_succeeded", sessionJson(get(sessionId), false)),
      asyncFailed: (sessionId: string) => event("checkout.session.async_payment_failed", sessionJson(get(sessionId), false)),
      expired: (sessionId: string) => event("checkout.session.expired", sessionJson(get(sessionId), false)),
      /** Charges carry no order metadata here, so the server must find the order through the payment intent. */
      chargeRefunded: (sessionId: string) => {
        const intent = intentOf(sessionId)
        return event("charge.refunded", {
          id: intent.charge,
          object: "charge",
          amount: 500,
          amount_refunded: 500,
          refunded: true,
          payment_intent: intent.id,
          metadata: {}
        })
      },
      refundCreated: (sessionId: string, status = "succeeded") => {
        const intent = intentOf(sessionId)
        return event("refund.created", {
          id: `re_${alnum(12)}`,
          object: "refund",
          amount: 500,
          charge: intent.charge,
          payment_intent: intent.id,
          status,
          metadata: {}
        })
      },
      disputeCreated: (sessionId: string) => {
        const intent = intentOf(sessionId)
        return event("charge.dispute.created", {
          id: `dp_${alnum(12)}`,
          object: "dispute",
          amount: 500,
          charge: intent.charge,
          payment_intent: intent.id,
          status: "needs_response",
          reason: "fraudulent",
          metadata: {}
        })
      }
    },
    /** Signs `event` with the webhook secret (stripe.webhooks.generateTestHeaderString) and POSTs it. */
    sendWebhook: async (
      url: string,
      payload: Json,
      options: { readonly timestamp?: number; readonly secret?: string } = {}
    ): Promise<WebhookDelivery> => {
      const body = JSON.stringify(payload)
      const signature = signer.webhooks.generateTestHeaderString({
        payload: body,
        secret: options.secret ?? webhookSecret,
        ...(options.timestamp === undefined ? {} : { timestamp: options.timestamp })
      })
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", "stripe-signature": signature },
        body
      })
      return { status: response.status, body: await response.text() }
    },
    close: () => closeServer(server)
  }
}

export type FakeStripe = Awaited<ReturnType<typeof startFakeStripe>>
