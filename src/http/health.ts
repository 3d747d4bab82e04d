/** GET /health: liveness with the service version, payment network, which payment ways are on, modes and the operator. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { AppConfig } from "../config.ts"
import { Processor } from "../credits/Processor.ts"
import { SandboxMode } from "../sandboxMode.ts"
import { SERVICE_VERSION } from "../version.ts"
import { X402Funding } from "../x402/X402Funding.ts"
import { API_VERSION, MorselApi } from "./Api.ts"

export { SERVICE_VERSION }
export const PAYMENT_NETWORK = "eip155:8453"

export const HealthHttpLive = HttpApiBuilder.group(MorselApi, "health", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const sandbox = yield* SandboxMode
    const cards = yield* Processor
    const x402 = yield* X402Funding
    const body = {
      status: "ok",
      service: "morsel",
      version: SERVICE_VERSION,
      api_version: API_VERSION,
      payment_network: PAYMENT_NETWORK,
      x402_enabled: x402.enabled,
      card_credits_enabled: cards.enabled,
      test_mode: settings.testMode,
      sandbox,
      operator: {
        name: Option.getOrNull(settings.operator.name),
        support_contact: Option.getOrNull(settings.operator.supportContact),
        terms_url: Option.getOrNull(settings.operator.termsUrl),
        privacy_url: Option.getOrNull(settings.operator.privacyUrl)
      }
    } as const
    return handlers.handle("health", () => Effect.succeed(body))
  })
)
