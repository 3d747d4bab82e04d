/** Raw routes of the credits feature: the Stripe webhook (signature on the raw body) and the checkout return pages. */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Webhooks } from "./webhooks.ts"

/** `POST /webhooks/stripe`: the raw body and its signature go to the one webhook receiver. */
export const StripeWebhookRoute = HttpLayerRouter.use((router) =>
  Effect.gen(function* () {
    const webhooks = yield* Webhooks
    yield* router.add("POST", "/webhooks/stripe", (request) =>
      Effect.gen(function* () {
        const body = yield* request.text.pipe(Effect.option)
        const answer = yield* webhooks.receive(body, request.headers["stripe-signature"])
        return HttpServerResponse.unsafeJson(answer.body, { status: answer.status })
      })
    )
  })
)

const page = (title: string, text: string) =>
  HttpServerResponse.html(
    `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body><h1>${title}</h1><p>${text}</p></body></html>`
  )

/** Where the hosted checkout sends the cardholder back; the credits arrive by webhook or by confirm. */
export const CheckoutReturnPages = Layer.mergeAll(
  HttpLayerRouter.add(
    "GET",
    "/checkout/success",
    page(
      "Payment received",
      "Your 500 credits are added within moments. If the balance does not show them yet, call POST /v1/credits/confirm with the session_id of this checkout."
    )
  ),
  HttpLayerRouter.add(
    "GET",
    "/checkout/cancel",
    page("Checkout canceled", "Nothing was charged. To buy credits, retry the same order_id with POST /v1/credits/checkout.")
  )
)

/** Every raw route of the credits feature. */
export const CreditsRoutes = Layer.mergeAll(StripeWebhookRoute, CheckoutReturnPages)
