/** Traces over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set; unset, nothing is loaded and spans cost nothing. */
import { FetchHttpClient, Headers, HttpMiddleware } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { constTrue } from "effect/Function"
import packageJson from "../../package.json" with { type: "json" }
import { AppConfig } from "../config.ts"

/** Request headers that carry secrets: recorded as REDACTED on spans. */
const SECRET_HEADERS = ["authorization", "payment-signature", "stripe-signature", "cookie", "x-api-key"]

export const TracingLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const settings = yield* AppConfig
    // Unset, no span is even made: the request tracer middleware steps aside and every withSpan is a no-op.
    if (Option.isNone(settings.otlpEndpoint)) {
      return Layer.merge(Layer.setTracerEnabled(false), Layer.locallyScoped(HttpMiddleware.currentTracerDisabledWhen, constTrue))
    }
    const [{ layer }, { layerJson }] = yield* Effect.promise(() =>
      Promise.all([import("@effect/opentelemetry/OtlpTracer"), import("@effect/opentelemetry/OtlpSerialization")])
    )
    const exporter = layer({
      url: `${settings.otlpEndpoint.value.replace(/\/+$/, "")}/v1/traces`,
      resource: { serviceName: "morsel", serviceVersion: packageJson.version },
      exportInterval: "2 seconds"
    }).pipe(Layer.provide(layerJson), Layer.provide(FetchHttpClient.layer))
    return Layer.merge(exporter, Layer.locallyScoped(Headers.currentRedactedNames, SECRET_HEADERS))
  })
)
