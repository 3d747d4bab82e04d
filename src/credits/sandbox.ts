/**
 * The in-memory processor's own checkout: a page with a Pay button, and pay and refund controls. What the
 * processor then reports reaches the service as signed webhook events through the one webhook receiver.
 */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Context, Data, Effect, Layer, Option } from "effect"
import { AppConfig, type Operator } from "../config.ts"
import type { CardSession, Json, RefundStatus } from "./cards.ts"
import { PACK_CREDITS } from "./Ledger.ts"
import { MemoryCards } from "./ProcessorMemory.ts"
import { Webhooks } from "./webhooks.ts"

export class SandboxRefused extends Data.TaggedError("SandboxRefused")<{
  readonly status: 404 | 409
  readonly code: "session_not_found" | "session_not_open" | "session_not_paid"
  readonly message: string
}> {}

/** Where the cardholder returns after paying: the success URL the checkout was created with. */
const returnUrl = (s: CardSession) => s.success_url.replaceAll("{CHECKOUT_SESSION_ID}", s.id)

export class SandboxCheckout extends Context.Tag("morsel/credits/SandboxCheckout")<
  SandboxCheckout,
  {
    readonly session: (sessionId: string) => Effect.Effect<CardSession, SandboxRefused>
    /** The cardholder pays: the session completes paid and `checkout.session.completed` is delivered. */
    readonly pay: (sessionId: string) => Effect.Effect<
      { readonly session_id: string; readonly order_id: string | null; readonly payment_status: string; readonly return_url: string },
      SandboxRefused
    >
    /** The merchant refunds the payment in full: `refund.created` and `charge.refunded` are delivered. */
    readonly refund: (sessionId: string) => Effect.Effect<
      { readonly session_id: string; readonly order_id: string | null; readonly refund_id: string; readonly refund_status: RefundStatus },
      SandboxRefused
    >
    /** Sends one event the way Stripe would. */
    readonly deliver: (event: Json) => Effect.Effect<void>
  }
>() {}

export const SandboxCheckoutLive = Layer.effect(
  SandboxCheckout,
  Effect.gen(function* () {
    const memory = yield* MemoryCards
    const webhooks = yield* Webhooks
    const { cards } = memory

    /** Sends one event the way Stripe would; a refused delivery is logged (checkout-status and confirm still resolve the order). */
    const deliver = (event: Json) =>
      Effect.gen(function* () {
        const { body, signature } = yield* memory.sign(event)
        const answer = yield* webhooks.receive(Option.some(body), signature)
        if (answer.status !== 200) yield* Effect.logWarning("sandbox webhook delivery refused", { status: answer.status })
      })

    const session = (sessionId: string) =>
      Effect.flatMap(memory.nowSeconds, (now) => {
        const s = cards.find(sessionId, now)
        return s === undefined
          ? Effect.fail(new SandboxRefused({ status: 404, code: "session_not_found", message: "No sandbox checkout has this session_id." }))
          : Effect.succeed(s)
      })

    /** The cardholder pays: the session completes paid and `checkout.session.completed` is delivered. */
    const pay = (sessionId: string) =>
      Effect.gen(function* () {
        const s = yield* session(sessionId)
        if (s.status !== "open") {
          return yield* new SandboxRefused({ status: 409, code: "session_not_open", message: `This checkout is ${s.status}; it cannot be paid.` })
        }
        cards.pay(s.id)
        yield* deliver(cards.events.completed(s.id, yield* memory.nowSeconds))
        return { session_id: s.id, order_id: s.client_reference_id, payment_status: "paid", return_url: returnUrl(s) }
      })

    /** The merchant refunds the payment in full: `refund.created` and `charge.refunded` are delivered. */
    const refund = (sessionId: string) =>
      Effect.gen(function* () {
        const s = yield* session(sessionId)
        if (s.payment_status !== "paid") {
          return yield* new SandboxRefused({ status: 409, code: "session_not_paid", message: "Only a paid checkout can be refunded." })
        }
        const now = yield* memory.nowSeconds
        const r = cards.refund(s.id, "succeeded", now)
        yield* deliver(cards.events.refundCreated(r.id, now))
        yield* deliver(cards.events.chargeRefunded(s.id, now))
        return { session_id: s.id, order_id: s.client_reference_id, refund_id: r.id, refund_status: r.status }
      })

    return SandboxCheckout.of({ session, pay, refund, deliver })
  })
)

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c)

/** Who runs this server and how to reach them, as the main page's footer says it. */
const operatorFooter = (operator: Operator) => {
  const parts: Array<string> = []
  if (Option.isSome(operator.name)) parts.push(`Run by ${escapeHtml(operator.name.value)}`)
  if (Option.isSome(operator.supportContact)) {
    const contact = operator.supportContact.value
    const href = /^https?:/i.test(contact) ? contact : `mailto:${contact}`
    parts.push(`Support: <a href="${escapeHtml(href)}">${escapeHtml(contact)}</a>`)
  }
  if (Option.isSome(operator.termsUrl)) parts.push(`<a href="${escapeHtml(operator.termsUrl.value)}">Terms and refunds</a>`)
  if (Option.isSome(operator.privacyUrl)) parts.push(`<a href="${escapeHtml(operator.privacyUrl.value)}">Privacy</a>`)
  return `<footer><p id="operator">${parts.length > 0 ? parts.join(" · ") : "This server's operator has not published a name or a support contact."}</p></footer>`
}

/** A page in the web page's own style sheet, icon and header. */
const sandboxPage = (title: string, body: string, operator: Operator) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · morsel</title><link rel="icon" href="/favicon.svg" type="image/svg+xml"><link rel="stylesheet" href="/app.css"></head>
<body>
<header class="top"><p class="brand">morsel</p><p class="tagline">One food photo in, a nutrition estimate out.</p></header>
<div class="banner">Sandbox: everything here is simulated. No card is charged.</div>
<main><section class="panel checkout">
${body}
</section></main>
${operatorFooter(operator)}
</body></html>`

const checkoutPage = (s: CardSession, operator: Operator) => {
  const id = escapeHtml(s.id)
  const action =
    s.status === "open"
      ? `<form method="post" action="/sandbox/checkout/${encodeURIComponent(s.id)}/pay">
<button type="submit">Pay USD 5.00</button>
</form>
<p><a href="${escapeHtml(s.cancel_url)}">Cancel and return</a></p>`
      : `<p role="status" class="message">This checkout is ${escapeHtml(s.status)}${s.payment_status === "paid" ? " and paid" : ""}.</p>
<p><a href="${escapeHtml(s.status === "complete" ? returnUrl(s) : s.cancel_url)}">Return</a></p>`
  return sandboxPage(
    "Sandbox checkout",
    `<h1>Sandbox checkout</h1>
<p class="hint">No card is charged: this is the sandbox's own payment page.</p>
<dl>
<dt>Order</dt><dd><code>${escapeHtml(s.client_reference_id ?? "unknown")}</code></dd>
<dt>Item</dt><dd>${PACK_CREDITS} credits</dd>
<dt>Amount</dt><dd>USD 5.00</dd>
<dt>Session</dt><dd><code>${id}</code></dd>
</dl>
${action}`,
    operator
  )
}

const refusal = (e: SandboxRefused) => HttpServerResponse.unsafeJson({ error: { code: e.code, message: e.message } }, { status: e.status })

const sessionIdParam = Effect.map(HttpLayerRouter.params, (p) => p["session_id"] ?? "")

/** A browser's form post is sent back to the return URL; any other client gets JSON. */
const wantsPage = (accept: string | undefined) => accept?.includes("text/html") === true

/**
 * `GET /sandbox/checkout/{session_id}`, `POST /sandbox/checkout/{session_id}/pay` and `…/refund`; mounted only
 * with the in-memory processor (needs MemoryCards and Webhooks).
 */
export const SandboxCheckoutRoutes = HttpLayerRouter.use((router) =>
  Effect.gen(function* () {
    const sandbox = yield* SandboxCheckout
    const { operator } = yield* AppConfig
    yield* router.add(
      "GET",
      "/sandbox/checkout/:session_id",
      Effect.flatMap(sessionIdParam, sandbox.session).pipe(
        Effect.map((s) => HttpServerResponse.html(checkoutPage(s, operator))),
        Effect.catchTag("SandboxRefused", (e) =>
          Effect.succeed(
            HttpServerResponse.html(
              sandboxPage("Checkout not found", `<h1>Checkout not found</h1>\n<p>${escapeHtml(e.message)}</p>\n<p><a href="/">Back to morsel</a></p>`, operator)
            ).pipe(HttpServerResponse.setStatus(e.status))
          )
        )
      )
    )
    yield* router.add("POST", "/sandbox/checkout/:session_id/pay", (request) =>
      Effect.flatMap(sessionIdParam, sandbox.pay).pipe(
        Effect.map((paid) =>
          wantsPage(request.headers["accept"])
            ? HttpServerResponse.redirect(paid.return_url, { status: 303 })
            : HttpServerResponse.unsafeJson(paid)
        ),
        Effect.catchTag("SandboxRefused", (e) => Effect.succeed(refusal(e)))
      )
    )
    yield* router.add(
      "POST",
      "/sandbox/checkout/:session_id/refund",
      Effect.flatMap(sessionIdParam, sandbox.refund).pipe(
        Effect.map((refunded) => HttpServerResponse.unsafeJson(refunded)),
        Effect.catchTag("SandboxRefused", (e) => Effect.succeed(refusal(e)))
      )
    )
  })
).pipe(Layer.provide(SandboxCheckoutLive))
