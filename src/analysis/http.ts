/** POST /v1/analyze over REST: the headers decoded into a credential, the receipt and Retry-After sent back as headers. */
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Clock, Effect, Option, Schema } from "effect"
import { AnalysisResult } from "../domain/schemas.ts"
import { AppConfig } from "../config.ts"
import { MorselApi } from "../http/Api.ts"
import { makeClientAddress } from "../request/clientAddress.ts"
import { ReplayCache, replayKey } from "../http/fastLane.ts"
import { setResponseHeader } from "../http/headers.ts"
import { withRetryAfter } from "../limits/http.ts"
import { AnalyzeRequests, type Served } from "./AnalyzeRequests.ts"
import { credentialOf, PaymentProof } from "./Funding.ts"

const encodeResult = Schema.encode(AnalysisResult)

export const AnalysisHttpLive = HttpApiBuilder.group(MorselApi, "analysis", (handlers) =>
  Effect.gen(function* () {
    const requests = yield* AnalyzeRequests
    const replays = yield* ReplayCache
    const clientAddress = makeClientAddress((yield* AppConfig).trustedProxies)

    /** The same request (credential, Idempotency-Key and input) is answered from this instance's memory while the result may be replayed. */
    const remember = ({ input, paymentResponse, replayableUntil, result }: Served) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const encoded = yield* Effect.option(encodeResult(result))
        if (Option.isNone(encoded) || (yield* Clock.currentTimeMillis) >= replayableUntil.getTime()) return
        replays.record(replayKey(request.headers, input), { body: JSON.stringify(encoded.value), paymentResponse, untilMs: replayableUntil.getTime() })
      })

    return handlers.handle(
      "analyze",
      ({ headers, payload }) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          requests.analyze({
            idempotencyKey: headers["idempotency-key"],
            credential: credentialOf(
              Option.fromNullable(headers.authorization),
              Option.map(Option.fromNullable(headers["payment-signature"]), (text) => PaymentProof.Encoded({ text })),
              clientAddress(request)
            ),
            payload
          })
        ).pipe(
            Effect.tap(remember),
            Effect.tap(({ paymentResponse }) =>
              Option.match(paymentResponse, { onNone: () => Effect.void, onSome: (value) => setResponseHeader("payment-response", value) })
            ),
            Effect.map(({ result }) => result),
            withRetryAfter
          ),
      // A caller who hangs up does not cancel a paid analysis: it completes and can be replayed.
      { uninterruptible: true }
    )
  })
)
