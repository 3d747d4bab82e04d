/** The raw route of the credits feature: the Stripe webhook, its signature checked on the raw body. */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Webhooks } from "./webhooks.ts"

/** `POST /webhooks/stripe`: the raw body and its signature go to the one webhook receiver. */
export const StripeWebhookRoute = HttpLayerRouter.use((router) =>
  Effect.gen(function* () {
    const webhooks = yield* Webhooks
    yield* router.add("POST", "/webhooks/stripe", (request) =>
      Effect.gen(function* () {
        const body = yield* request.text.pipe(Effect.option)
        const answer = yield* webhooks.receive(body, request.headers["stripe-signature"])
        return HttpServerResponse.unsafeJson(answer.body, {
          status: answer.status,
          ...(answer.retryAfter === undefined ? {} : { headers: { "retry-after": String(answer.retryAfter) } })
        })
      })
    )
  })
)

/** Every raw route of the credits feature. */
export const CreditsRoutes = StripeWebhookRoute
