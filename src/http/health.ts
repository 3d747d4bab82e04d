/** GET /health: liveness with the service version, payment network and modes (test, sandbox). */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import packageJson from "../../package.json" with { type: "json" }
import { AppConfig } from "../config.ts"
import { SandboxMode } from "../sandbox/mode.ts"
import { API_VERSION, MorselApi } from "./Api.ts"

export const SERVICE_VERSION = packageJson.version
export const PAYMENT_NETWORK = "eip155:8453"

export const HealthHttpLive = HttpApiBuilder.group(MorselApi, "health", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const sandbox = yield* SandboxMode
    const body = {
      status: "ok",
      service: "morsel",
      version: SERVICE_VERSION,
      api_version: API_VERSION,
      payment_network: PAYMENT_NETWORK,
      x402_enabled: Option.isSome(settings.x402.payTo),
      card_credits_enabled: Option.isSome(settings.stripe),
      test_mode: settings.testMode,
      sandbox
    } as const
    return handlers.handle("health", () => Effect.succeed(body))
  })
)
