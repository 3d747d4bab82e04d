/** The start-up banner: where the service listens, on which database, and which parts are on (or the setting that turns each on). */
import { Console, Effect, Option, Redacted } from "effect"
import type { Settings } from "../config.ts"
import { describeModelCall } from "../model/settings.ts"
import { foodData } from "../foods/core/repository.ts"
import { SHIPPED_LABEL } from "../foods/core/shipped.ts"

export interface Part {
  readonly name: string
  readonly on: boolean
  /** What is on, or what to set to turn it on. */
  readonly detail: string
}

export interface StartFacts {
  readonly address: string
  readonly database: string
  readonly parts: ReadonlyArray<Part>
  readonly foods: number
  /** What serves the foods: the label of the newest import ("USDA SR28 (shipped copy)", or the path imported). */
  readonly foodData?: string | undefined
}

const hostOf = (url: string) => (URL.canParse(url) ? new URL(url).host : url)

/** The parts of the service and how each is set, from the settings alone. */
export const partsOf = (settings: Settings): ReadonlyArray<Part> => [
  Option.isSome(settings.openai.apiKey)
    ? { name: "vision model", on: true, detail: `${settings.openai.model} at ${hostOf(Option.getOrElse(settings.openai.baseUrl, () => "api.openai.com"))}` }
    : { name: "vision model", on: false, detail: "set OPENAI_API_KEY (until then analyses answer 503 model_unavailable)" },
  // How the model is called (VISION_* and MODEL_PRICE_* settings), shown whole in both forms of the banner.
  ...(Option.isSome(settings.openai.apiKey) ? [{ name: "model call", on: true, detail: describeModelCall(settings.openai.call) }] : []),
  Option.isSome(settings.stripe)
    ? { name: "card credits", on: true, detail: `Stripe${settings.testMode ? " test mode" : ""}, webhook at /webhooks/stripe` }
    : { name: "card credits", on: false, detail: "set STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET" },
  Option.isSome(settings.x402.payTo)
    ? {
        name: "x402",
        on: true,
        detail: `0.01 USDC to ${settings.x402.payTo.value}, settled ${Option.isSome(settings.x402.facilitatorUrl) ? `by ${hostOf(settings.x402.facilitatorUrl.value)}` : "by this server's wallet"}`
      }
    : { name: "x402", on: false, detail: "set X402_PAY_TO with X402_SETTLER_PRIVATE_KEY or X402_FACILITATOR_URL" },
  Option.isSome(settings.operator.supportContact)
    ? {
        name: "support contact",
        on: true,
        detail: `${Option.match(settings.operator.name, { onNone: () => "", onSome: (name) => `${name}, ` })}${settings.operator.supportContact.value}`
      }
    : { name: "support contact", on: false, detail: "set SUPPORT_CONTACT (and OPERATOR_NAME, TERMS_URL, PRIVACY_URL) so cardholders can reach you" },
  Option.isSome(settings.adminToken)
    ? { name: "admin", on: true, detail: "POST /admin/rpc with the ADMIN_TOKEN bearer" }
    : { name: "admin", on: false, detail: "set ADMIN_TOKEN" },
  settings.metrics ? { name: "metrics", on: true, detail: "GET /metrics" } : { name: "metrics", on: false, detail: "set METRICS=on" },
  Option.isSome(settings.otlpEndpoint)
    ? { name: "traces", on: true, detail: `OTLP to ${settings.otlpEndpoint.value}` }
    : { name: "traces", on: false, detail: "set OTEL_EXPORTER_OTLP_ENDPOINT" }
]

/** The database in words; a server's password never appears. */
export const databaseOf = (settings: Settings): string =>
  Option.match(settings.databaseUrl, {
    onNone: () => (settings.dataDir === "memory://" ? "embedded PostgreSQL in the temporary directory (nothing is kept)" : `embedded PostgreSQL in ${settings.dataDir}`),
    onSome: (url) => {
      const text = Redacted.value(url)
      if (!URL.canParse(text)) return "PostgreSQL server (DATABASE_URL)"
      const parsed = new URL(text)
      return `PostgreSQL at ${parsed.host || parsed.searchParams.get("host") || "local socket"}${parsed.pathname}`
    }
  })

/** The banner as people read it. */
export const bannerText = (facts: StartFacts): string => {
  const width = Math.max(...facts.parts.map((p) => p.name.length), "food records".length)
  const row = (name: string, text: string) => `  ${name.padEnd(width)}  ${text}`
  return [
    `morsel listening on ${facts.address}  (web page ${facts.address}/, API reference ${facts.address}/docs)`,
    row("database", facts.database),
    ...facts.parts.map((p) => row(p.name, `${p.on ? "on " : "off"}  ${p.detail}`)),
    row(
      "food records",
      facts.foods > 0
        ? `${facts.foods.toLocaleString("en-US")} USDA foods: ${foodDataText(facts.foodData)}`
        : "none: items keep the model's numbers; import with `morsel fooddb import <dir|zip>`"
    )
  ].join("\n")
}

/** The shipped copy by its name; an import by where it came from. */
const foodDataText = (label: string | undefined) =>
  label === undefined ? "imported" : label === SHIPPED_LABEL ? `${label}; \`morsel fooddb import\` replaces it` : `imported from ${label}`

const foodFacts = foodData.pipe(Effect.orElseSucceed(() => ({ foods: 0, label: undefined })))

/** Says how the service started: text on stdout for a person (LOG_FORMAT=pretty), else one JSON log line. */
export const announce = (settings: Settings, address: string) =>
  Effect.gen(function* () {
    const food = yield* foodFacts
    const facts: StartFacts = { address, database: databaseOf(settings), parts: partsOf(settings), foods: food.foods, foodData: food.label }
    if (settings.logFormat === "pretty") return yield* Console.log(bannerText(facts))
    yield* Effect.logInfo("morsel started").pipe(
      Effect.annotateLogs({
        address: facts.address,
        database: facts.database,
        food_records: facts.foods,
        ...(facts.foods > 0 && facts.foodData !== undefined ? { food_data: facts.foodData } : {}),
        ...Object.fromEntries(facts.parts.map((p) => [p.name.replace(/ /g, "_"), p.on ? (p.name === "model call" ? p.detail : "on") : `off: ${p.detail}`]))
      })
    )
  })
