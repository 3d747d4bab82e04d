/** POST /v1/analyze over REST: the headers decoded into a credential, the receipt and Retry-After sent back as headers. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { MorselApi } from "../http/Api.ts"
import { setResponseHeader } from "../http/headers.ts"
import { withRetryAfter } from "../limits/http.ts"
import { decodePayment } from "../x402/protocol.ts"
import { AnalyzeRequests } from "./AnalyzeRequests.ts"
import { credentialOf } from "./Funding.ts"

export const AnalysisHttpLive = HttpApiBuilder.group(MorselApi, "analysis", (handlers) =>
  Effect.map(AnalyzeRequests, (requests) =>
    handlers.handle(
      "analyze",
      ({ headers, payload }) =>
        requests
          .analyze({
            idempotencyKey: headers["idempotency-key"],
            credential: credentialOf(Option.fromNullable(headers.authorization), Option.map(Option.fromNullable(headers["payment-signature"]), decodePayment)),
            payload
          })
          .pipe(
            Effect.tap(({ paymentResponse }) =>
              Option.match(paymentResponse, { onNone: () => Effect.void, onSome: (value) => setResponseHeader("payment-response", value) })
            ),
            Effect.map(({ result }) => result),
            withRetryAfter
          ),
      // A caller who hangs up does not cancel a paid analysis: it completes and can be replayed.
      { uninterruptible: true }
    )
  )
)
