/**
 * A small stateful Stripe API on 127.0.0.1 for the real `stripe` SDK: checkout sessions, payment intents, refunds
 * and webhooks, served over the in-memory processor's state (src/credits/cards.ts) in Stripe's wire format.
 */
import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import Stripe from "stripe"
import { type DisputeStatus, type Json, makeCards, type RefundStatus } from "../../src/credits/cards.ts"
import { closeServer, readBody } from "./http.ts"

type Form = { [key: string]: Form | string }

export interface WebhookDelivery {
  readonly status: number
  readonly body: string
  readonly retryAfter: string | null
}

const alnum = (bytes: number) => randomBytes(bytes).toString("hex")

export type { Json }

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
  const idempotency = new Map<string, { body: string; status: number; response: string }>()
  const params = new Map<string, Form>()
  let clockSeconds: number | undefined
  let downFor = 0
  let loseFor = 0
  let hangFor = 0
  const calls = { create: 0, createReplayed: 0, retrieve: 0, list: 0, expire: 0, paymentIntent: 0, refunds: 0 }

  const now = () => clockSeconds ?? Math.floor(Date.now() / 1000)
  let baseUrl = ""
  const cards = makeCards({ live, checkoutUrl: (id) => `${baseUrl}/pay/${id}` })

  const send = (res: ServerResponse, status: number, body: Json) => {
    const text = JSON.stringify(body)
    res.writeHead(status, { "content-type": "application/json", "request-id": `req_${alnum(6)}` })
    res.end(text)
    return text
  }
  const missing = (res: ServerResponse, what: string) =>
    send(res, 404, { error: { type: "invalid_request_error", code: "resource_missing", message: `No such ${what}` } })

  const createSession = (form: Form) => {
    const unitAmount = Number(str(form, "line_items", "0", "price_data", "unit_amount") ?? "0")
    const quantity = Number(str(form, "line_items", "0", "quantity") ?? "1")
    const created = cards.create(
      {
        mode: str(form, "mode") ?? "payment",
        amountTotal: unitAmount * quantity,
        currency: str(form, "line_items", "0", "price_data", "currency") ?? "usd",
        clientReferenceId: str(form, "client_reference_id") ?? null,
        metadata: record(form, "metadata"),
        intentMetadata: record(form, "payment_intent_data", "metadata"),
        successUrl: str(form, "success_url") ?? "",
        cancelUrl: str(form, "cancel_url") ?? "",
        expiresAt: Number(str(form, "expires_at") ?? String(now() + 24 * 3600))
      },
      now()
    )
    if (created._tag === "IdempotencyConflict") throw new Error("unreachable: creates carry no key here")
    params.set(created.session.id, form)
    return created.session
  }

  const handle = (req: IncomingMessage, res: ServerResponse, body: string) => {
    if (hangFor > 0) {
      // Accepted and never answered: the caller's own timeout ends it (or the fake closing).
      hangFor--
      return
    }
    if (loseFor > 0) {
      loseFor--
      // The call is carried out, but its answer never reaches the caller: the connection breaks first.
      const lost = new Proxy(res, {
        get: (target, prop) =>
          prop === "writeHead" ? () => lost : prop === "end" ? () => req.socket.destroy() : Reflect.get(target, prop, target)
      })
      return serve(req, lost, body)
    }
    return serve(req, res, body)
  }

  const serve = (req: IncomingMessage, res: ServerResponse, body: string) => {
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
      const text = send(res, 200, cards.json.session(s, false))
      if (idemKey !== undefined) idempotency.set(idemKey, { body, status: 200, response: text })
      return
    }
    const expire = /^\/v1\/checkout\/sessions\/([^/]+)\/expire$/.exec(path)
    if (req.method === "POST" && expire?.[1] !== undefined) {
      calls.expire++
      const s = cards.find(expire[1], now())
      if (s === undefined) return missing(res, "checkout.session")
      return send(res, 200, cards.json.session(cards.expire(s.id), false))
    }
    const one = /^\/v1\/checkout\/sessions\/([^/]+)$/.exec(path)
    if (req.method === "GET" && one?.[1] !== undefined) {
      calls.retrieve++
      const s = cards.find(one[1], now())
      if (s === undefined) return missing(res, "checkout.session")
      const expand = [...url.searchParams.entries()].some(([k, v]) => k.startsWith("expand") && v === "payment_intent")
      return send(res, 200, cards.json.session(s, expand))
    }
    if (req.method === "GET" && path === "/v1/checkout/sessions") {
      calls.list++
      const q = url.searchParams
      const gte = q.get("created[gte]")
      const lte = q.get("created[lte]")
      const startingAfter = q.get("starting_after")
      const page = cards.list(
        {
          limit: Math.min(100, Number(q.get("limit") ?? "10")),
          ...(gte === null ? {} : { gte: Number(gte) }),
          ...(lte === null ? {} : { lte: Number(lte) }),
          ...(startingAfter === null ? {} : { startingAfter })
        },
        now()
      )
      return send(res, 200, {
        object: "list",
        url: "/v1/checkout/sessions",
        has_more: page.hasMore,
        data: page.data.map((s) => cards.json.session(s, false))
      })
    }
    if (req.method === "GET" && path === "/v1/refunds") {
      calls.refunds++
      const data = cards.refundsOf(url.searchParams.get("payment_intent") ?? "").map(cards.json.refund)
      return send(res, 200, { object: "list", url: "/v1/refunds", has_more: false, data })
    }
    const pi = /^\/v1\/payment_intents\/([^/]+)$/.exec(path)
    if (req.method === "GET" && pi?.[1] !== undefined) {
      calls.paymentIntent++
      const intent = cards.intentById(pi[1])
      if (intent === undefined) return missing(res, "payment_intent")
      return send(res, 200, cards.json.intent(intent))
    }
    return send(res, 404, { error: { type: "invalid_request_error", message: `Unrecognized request URL (${req.method} ${path})` } })
  }

  const server = createServer((req, res) => {
    void readBody(req).then((body) => handle(req, res, body))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  baseUrl = `http://127.0.0.1:${port}`

  return {
    url: baseUrl,
    secretKey,
    webhookSecret,
    calls,
    sessions: cards.sessions,
    refunds: cards.refunds,
    disputes: cards.disputes,
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
    /** The next `n` API calls are accepted and never answered. */
    hangNext: (n: number) => {
      hangFor = n
    },
    /** The next `n` API calls are carried out, but the connection breaks before their answer. */
    loseAnswersOfNext: (n: number) => {
      loseFor = n
    },
    session: cards.get,
    /** The create parameters of a session as sent, for assertions. */
    paramsOf: (sessionId: string) => params.get(sessionId),
    /** The cardholder pays by card: the session completes paid. */
    pay: cards.pay,
    /** A delayed method: the session completes unpaid and the payment is processing. */
    payAsync: cards.payAsync,
    asyncSucceeds: cards.asyncSucceeds,
    asyncFails: cards.asyncFails,
    expire: cards.expire,
    /** Refunds the session's payment in full; returns the refund's id. */
    refund: (sessionId: string, status: RefundStatus = "succeeded") => cards.refund(sessionId, status, now()).id,
    updateRefund: (refundId: string, status: RefundStatus) => cards.updateRefund(refundId, status),
    /** The cardholder disputes the session's payment; returns the dispute's id. */
    dispute: (sessionId: string, status: DisputeStatus = "needs_response") => cards.dispute(sessionId, status, now()).id,
    updateDispute: (disputeId: string, status: DisputeStatus) => cards.updateDispute(disputeId, status),
    /** Sessions of other orders, `created` at the fake's clock, to make listings long. */
    seedSessions: (n: number, created?: number) => cards.seedSessions(n, created ?? now()),
    /** Event payloads as Stripe sends them, each object as it stands now. */
    events: {
      completed: (sessionId: string) => cards.events.completed(sessionId, now()),
      asyncSucceeded: (sessionId: string) => cards.events.asyncSucceeded(sessionId, now()),
      asyncFailed: (sessionId: string) => cards.events.asyncFailed(sessionId, now()),
      expired: (sessionId: string) => cards.events.expired(sessionId, now()),
      /** A charge is only refunded through a refund: a succeeded one is made when the payment has none yet. */
      chargeRefunded: (sessionId: string) => {
        const intent = cards.get(sessionId).payment_intent
        if (intent !== null && cards.refundsOf(intent.id).length === 0) cards.refund(sessionId, "succeeded", now())
        return cards.events.chargeRefunded(sessionId, now())
      },
      refundCreated: (refundId: string) => cards.events.refundCreated(refundId, now()),
      refundUpdated: (refundId: string) => cards.events.refundUpdated(refundId, now()),
      refundFailed: (refundId: string) => cards.events.refundFailed(refundId, now()),
      disputeCreated: (disputeId: string) => cards.events.disputeCreated(disputeId, now()),
      disputeUpdated: (disputeId: string) => cards.events.disputeUpdated(disputeId, now()),
      disputeClosed: (disputeId: string) => cards.events.disputeClosed(disputeId, now())
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
      return { status: response.status, body: await response.text(), retryAfter: response.headers.get("retry-after") }
    },
    close: () => closeServer(server)
  }
}

export type FakeStripe = Awaited<ReturnType<typeof startFakeStripe>>
