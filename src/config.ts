/** Every setting of the service, read once from the environment and validated at start. */
import { isIP } from "node:net"
import { Config, ConfigError, ConfigProvider, Context, Effect, Either, Layer, Option, Redacted } from "effect"
import { type FileSettings, fileSettings } from "./mcp/files/settings.ts"
import { type ModelCallSettings, modelCallSettings } from "./model/settings.ts"

export interface Limits {
  readonly globalPerDay: number
  readonly globalPerHour: number
  readonly payerPerDay: number
  readonly concurrent: number
  readonly x402PerDay: number
  readonly x402PerHour: number
  readonly x402Concurrent: number
  readonly failuresPerDay: number
  readonly feedbackPerKeyPerDay: number
  readonly feedbackGlobalPerDay: number
  readonly creditsPerKeyPerMinute: number
  readonly creditsGlobalPerMinute: number
  /** Food search, food lookups and nutrition (REST and MCP) per client address and per key, each per minute. */
  readonly foodsPerMinute: number
}

export interface Operator {
  readonly name: Option.Option<string>
  /** An e-mail address or an http(s) URL. */
  readonly supportContact: Option.Option<string>
  readonly termsUrl: Option.Option<string>
  readonly privacyUrl: Option.Option<string>
}

export interface Settings {
  readonly host: string
  readonly port: number
  readonly publicBaseUrl: string
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly dataDir: string
  readonly openai: {
    readonly apiKey: Option.Option<Redacted.Redacted>
    readonly baseUrl: Option.Option<string>
    readonly model: string
    /** Reasoning effort, image detail, output cap and prices of the model call (src/model/settings.ts). */
    readonly call: ModelCallSettings
  }
  readonly analysisTimeoutMs: number
  readonly fdcApiKey: Option.Option<Redacted.Redacted>
  readonly stripe: Option.Option<{
    readonly secretKey: Redacted.Redacted
    readonly webhookSecret: Redacted.Redacted
    readonly apiBase: Option.Option<URL>
  }>
  /** Test mode follows the Stripe key: `sk_test_` keys mean `morsel_test_` API keys and `cs_test_` sessions. */
  readonly testMode: boolean
  readonly x402: {
    readonly payTo: Option.Option<`0x${string}`>
    readonly asset: `0x${string}`
    readonly rpcUrl: string
    readonly settlerPrivateKey: Option.Option<Redacted.Redacted<`0x${string}`>>
    readonly facilitatorUrl: Option.Option<string>
    readonly confirmTimeoutMs: number
    /** X402_SETTLER_LOW_BALANCE_WEI: under this, the settler wallet's balance is logged as a warning. */
    readonly settlerLowBalanceWei: bigint
  }
  readonly trustedOrigins: ReadonlyArray<string>
  /** Who runs this instance and how a cardholder reaches them: shown on the page, next to a paused key, on checkout return pages. */
  readonly operator: Operator
  /** TRUSTED_PROXIES: addresses or CIDR ranges whose X-Forwarded-For names the client; empty = the socket's peer is. */
  readonly trustedProxies: ReadonlyArray<string>
  readonly adminToken: Option.Option<Redacted.Redacted>
  readonly limits: Limits
  readonly logLevel: "all" | "trace" | "debug" | "info" | "warning" | "error" | "fatal" | "none"
  readonly logFormat: "json" | "pretty"
  /** METRICS=on serves GET /metrics. */
  readonly metrics: boolean
  /** OTEL_EXPORTER_OTLP_ENDPOINT: traces exported over OTLP/HTTP to `{endpoint}/v1/traces`. */
  readonly otlpEndpoint: Option.Option<string>
  /** MCP_FILE_*: photos analyze_food downloads from a file reference. */
  readonly mcpFiles: FileSettings
}

export const BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913" as const
export const DEFAULT_VISION_MODEL = "gpt-5-mini"

const invalid = (name: string, message: string) => ConfigError.InvalidData([name], message)

const address = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((s) =>
      /^0x[0-9a-fA-F]{40}$/.test(s) ? Either.right(s as `0x${string}`) : Either.left(invalid(name, `${name} must be a 0x-prefixed 20-byte hex address`))
    )
  )

const httpUrl = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((s) => {
      try {
        const url = new URL(s)
        return url.protocol === "http:" || url.protocol === "https:"
          ? Either.right(s.replace(/\/+$/, ""))
          : Either.left(invalid(name, `${name} must be an http(s) URL`))
      } catch {
        return Either.left(invalid(name, `${name} must be an http(s) URL, got an unparsable value`))
      }
    })
  )

/** 0.001 ETH: a few hundred settlements at Base's usual fees (docs/x402.md). */
const DEFAULT_SETTLER_LOW_BALANCE_WEI = 1_000_000_000_000_000n

const positiveInt = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a positive integer`, validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

const secretWithPrefix = (name: string, prefixes: ReadonlyArray<string>) =>
  Config.redacted(name).pipe(
    Config.validate({
      message: `${name} must start with ${prefixes.join(" or ")}`,
      validation: (r) => prefixes.some((p) => Redacted.value(r).startsWith(p))
    })
  )

const origins = Config.string("TRUSTED_ORIGINS").pipe(
  Config.withDefault(""),
  Config.mapOrFail((raw) => {
    const list = raw.split(",").map((s) => s.trim()).filter((s) => s.length > 0)
    for (const origin of list) {
      let parsed: URL
      try {
        parsed = new URL(origin)
      } catch {
        return Either.left(invalid("TRUSTED_ORIGINS", `must be a comma-separated list of origins such as https://app.example.com, not "${origin}"`))
      }
      if (parsed.origin !== origin) {
        return Either.left(invalid("TRUSTED_ORIGINS", `must list origins as scheme://host[:port], with no path or trailing slash, not "${origin}"`))
      }
    }
    return Either.right(list)
  })
)

const EMAIL = /^[^\s@<>()",;:]+@[^\s@<>()",;:]+\.[^\s@<>()",;:]+$/

/** An e-mail address (a `mailto:` prefix is dropped) or an http(s) URL. */
const supportContact = Config.string("SUPPORT_CONTACT").pipe(
  Config.mapOrFail((raw) => {
    const text = raw.trim().replace(/^mailto:/i, "")
    if (EMAIL.test(text)) return Either.right(text)
    try {
      const url = new URL(text)
      if (url.protocol === "http:" || url.protocol === "https:") return Either.right(text)
    } catch {
      // neither an address nor a URL: said below
    }
    return Either.left(invalid("SUPPORT_CONTACT", `SUPPORT_CONTACT must be an e-mail address or an http(s) URL, not "${raw}"`))
  })
)

const operator: Config.Config<Operator> = Config.all({
  name: Config.option(Config.string("OPERATOR_NAME").pipe(Config.map((s) => s.trim()))),
  supportContact: Config.option(supportContact),
  termsUrl: Config.option(httpUrl("TERMS_URL")),
  privacyUrl: Config.option(httpUrl("PRIVACY_URL"))
})

/** `::ffff:203.0.113.7` (an IPv4 peer on a dual-stack socket) is 203.0.113.7; IPv6 in lower case. */
export const normaliseAddress = (address: string): string => {
  const trimmed = address.trim().toLowerCase()
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(trimmed)
  return mapped?.[1] ?? trimmed
}

/** An address or CIDR range as TRUSTED_PROXIES takes it, or None when it is neither. */
export const parseProxyEntry = (entry: string): Option.Option<{ readonly address: string; readonly prefix: Option.Option<number> }> => {
  const [rawAddress = "", bits, ...rest] = entry.trim().split("/")
  const address = normaliseAddress(rawAddress)
  const family = isIP(address)
  if (family === 0 || rest.length > 0) return Option.none()
  if (bits === undefined) return Option.some({ address, prefix: Option.none() })
  const prefix = /^\d{1,3}$/.test(bits) ? Number(bits) : Number.NaN
  return prefix <= (family === 4 ? 32 : 128) ? Option.some({ address, prefix: Option.some(prefix) }) : Option.none()
}

const proxies = Config.string("TRUSTED_PROXIES").pipe(
  Config.withDefault(""),
  Config.mapOrFail((raw) => {
    const list = raw.split(",").map((s) => s.trim()).filter((s) => s.length > 0)
    const bad = list.find((entry) => Option.isNone(parseProxyEntry(entry)))
    return bad === undefined
      ? Either.right(list)
      : Either.left(invalid("TRUSTED_PROXIES", `must list IP addresses or CIDR ranges such as 10.0.0.0/8 or fd00::/8, not "${bad}"`))
  })
)

const limits: Config.Config<Limits> = Config.all({
  globalPerDay: positiveInt("LIMIT_GLOBAL_PER_DAY", 200),
  globalPerHour: positiveInt("LIMIT_GLOBAL_PER_HOUR", 30),
  payerPerDay: positiveInt("LIMIT_PAYER_PER_DAY", 100),
  concurrent: positiveInt("LIMIT_CONCURRENT", 3),
  x402PerDay: positiveInt("LIMIT_X402_PER_DAY", 100),
  x402PerHour: positiveInt("LIMIT_X402_PER_HOUR", 15),
  x402Concurrent: positiveInt("LIMIT_X402_CONCURRENT", 2),
  failuresPerDay: positiveInt("LIMIT_FAILURES_PER_DAY", 25),
  feedbackPerKeyPerDay: positiveInt("LIMIT_FEEDBACK_PER_KEY_PER_DAY", 10),
  feedbackGlobalPerDay: positiveInt("LIMIT_FEEDBACK_GLOBAL_PER_DAY", 1000),
  // Far above what a client checking its balance or buying a pack needs; low enough that a loop cannot swamp Stripe.
  creditsPerKeyPerMinute: positiveInt("LIMIT_CREDITS_PER_KEY_PER_MINUTE", 60),
  creditsGlobalPerMinute: positiveInt("LIMIT_CREDITS_GLOBAL_PER_MINUTE", 600),
  foodsPerMinute: positiveInt("LIMIT_FOODS_PER_MINUTE", 120)
})

const stripe = Config.all({
  secretKey: Config.option(secretWithPrefix("STRIPE_SECRET_KEY", ["sk_live_", "sk_test_"])),
  webhookSecret: Config.option(secretWithPrefix("STRIPE_WEBHOOK_SECRET", ["whsec_"])),
  apiBase: Config.option(httpUrl("STRIPE_API_BASE").pipe(Config.map((s) => new URL(s))))
}).pipe(
  Config.mapOrFail(({ apiBase, secretKey, webhookSecret }) => {
    if (Option.isNone(secretKey)) return Either.right(Option.none())
    if (Option.isNone(webhookSecret)) {
      return Either.left(invalid("STRIPE_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET is required when STRIPE_SECRET_KEY is set"))
    }
    return Either.right(Option.some({ secretKey: secretKey.value, webhookSecret: webhookSecret.value, apiBase }))
  })
)

/** The usual names of log levels, in any case: `warn` and `warning`, `off` and `none`, … */
const LOG_LEVELS: Readonly<Record<string, Settings["logLevel"]>> = {
  all: "all",
  trace: "trace",
  debug: "debug",
  info: "info",
  warn: "warning",
  warning: "warning",
  error: "error",
  fatal: "fatal",
  none: "none",
  off: "none",
  silent: "none"
}

const logLevel = Config.string("LOG_LEVEL").pipe(
  Config.mapOrFail((text) => {
    const level = LOG_LEVELS[text.trim().toLowerCase()]
    return level === undefined
      ? Either.left(ConfigError.InvalidData([], `must be a log level (${Object.keys(LOG_LEVELS).join(", ")}), not "${text}"`))
      : Either.right(level)
  }),
  Config.withDefault("info" as const)
)

const ON = new Set(["on", "true", "1", "yes"])
const OFF = new Set(["off", "false", "0", "no"])

const onOff = (name: string, fallback: boolean) =>
  Config.string(name).pipe(
    Config.mapOrFail((text) => {
      const value = text.trim().toLowerCase()
      if (ON.has(value)) return Either.right(true)
      if (OFF.has(value)) return Either.right(false)
      return Either.left(ConfigError.InvalidData([], `must be on or off, not "${text}"`))
    }),
    Config.withDefault(fallback)
  )

/** Reads and validates every setting; fails with a ConfigError naming the bad variable. */
export const loadSettings: Effect.Effect<Settings, ConfigError.ConfigError> = Effect.gen(function* () {
  const host = yield* Config.string("HOST").pipe(Config.withDefault("127.0.0.1"))
  const port = yield* Config.integer("PORT").pipe(
    Config.validate({ message: "PORT must be 0 (any free port) to 65535", validation: (n) => n >= 0 && n <= 65535 }),
    Config.withDefault(8787)
  )
  const publicBaseUrl = yield* httpUrl("PUBLIC_BASE_URL").pipe(Config.withDefault(`http://${host}:${port}`))
  const stripeSettings = yield* stripe
  return {
    host,
    port,
    publicBaseUrl,
    databaseUrl: yield* Config.option(Config.redacted("DATABASE_URL")),
    dataDir: yield* Config.string("MORSEL_DATA_DIR").pipe(Config.withDefault("./.morsel")),
    openai: {
      apiKey: yield* Config.option(Config.redacted("OPENAI_API_KEY")),
      baseUrl: yield* Config.option(httpUrl("OPENAI_BASE_URL")),
      model: yield* Config.string("VISION_MODEL").pipe(Config.withDefault(DEFAULT_VISION_MODEL)),
      call: yield* modelCallSettings
    },
    analysisTimeoutMs: yield* positiveInt("ANALYSIS_TIMEOUT_MS", 45_000),
    fdcApiKey: yield* Config.option(Config.redacted("FDC_API_KEY")),
    stripe: stripeSettings,
    testMode: Option.match(stripeSettings, {
      onNone: () => false,
      onSome: (s) => Redacted.value(s.secretKey).startsWith("sk_test_")
    }),
    x402: {
      payTo: yield* Config.option(address("X402_PAY_TO")),
      asset: yield* address("X402_ASSET").pipe(Config.withDefault(BASE_USDC)),
      rpcUrl: yield* httpUrl("X402_RPC_URL").pipe(Config.withDefault("https://mainnet.base.org")),
      settlerPrivateKey: yield* Config.option(
        Config.redacted("X402_SETTLER_PRIVATE_KEY").pipe(
          Config.validate({
            message: "X402_SETTLER_PRIVATE_KEY must be a 0x-prefixed 32-byte hex private key",
            validation: (r) => /^0x[0-9a-fA-F]{64}$/.test(Redacted.value(r))
          }),
          Config.map((r) => r as Redacted.Redacted<`0x${string}`>)
        )
      ),
      facilitatorUrl: yield* Config.option(httpUrl("X402_FACILITATOR_URL")),
      confirmTimeoutMs: yield* positiveInt("X402_CONFIRM_TIMEOUT_MS", 20_000),
      settlerLowBalanceWei: yield* Config.string("X402_SETTLER_LOW_BALANCE_WEI").pipe(
        Config.validate({ message: "X402_SETTLER_LOW_BALANCE_WEI must be a whole number of wei", validation: (v) => /^\d{1,30}$/.test(v) }),
        Config.map(BigInt),
        Config.withDefault(DEFAULT_SETTLER_LOW_BALANCE_WEI)
      )
    },
    trustedOrigins: yield* origins,
    operator: yield* operator,
    trustedProxies: yield* proxies,
    adminToken: yield* Config.option(Config.redacted("ADMIN_TOKEN")),
    limits: yield* limits,
    logLevel: yield* logLevel,
    logFormat: yield* Config.literal("json", "pretty")("LOG_FORMAT").pipe(
      // People read a terminal; machines read everything else. Log lines go to stderr (src/logging.ts).
      Config.withDefault(process.stderr.isTTY ? ("pretty" as const) : ("json" as const))
    ),
    metrics: yield* onOff("METRICS", false),
    otlpEndpoint: yield* Config.option(httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT")),
    mcpFiles: yield* fileSettings
  } satisfies Settings
})

/** An empty variable counts as unset, so `FOO=` in a shell or an env file switches a feature off. */
const providerOf = (env: Readonly<Record<string, string | undefined>>) =>
  ConfigProvider.fromMap(
    new Map(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ""))
  )

/** Effect's own words for a value it could not read, as a rule the value must follow. */
const PARSER_WORDS: ReadonlyArray<readonly [RegExp, (...parts: Array<string>) => string]> = [
  [/^Expected an integer value but received "?(.*?)"?$/s, (got) => `must be a whole number, not "${got}"`],
  [/^Expected a (?:float|number) value but received "?(.*?)"?$/s, (got) => `must be a number, not "${got}"`],
  [/^Expected a boolean value but received "?(.*?)"?$/s, (got) => `must be true or false, not "${got}"`],
  [/^Expected one of \((.*)\) but received "?(.*?)"?$/s, (options, got) => `must be one of ${options}, not "${got}"`],
  [/^Expected .* to exist in the process context$/s, () => "must be set"]
]

const leavesOf = (error: ConfigError.ConfigError): Array<{ readonly path: ReadonlyArray<string>; readonly message: string }> =>
  error._op === "And" || error._op === "Or" ? [...leavesOf(error.left), ...leavesOf(error.right)] : [{ path: error.path, message: error.message }]

/**
 * Each bad setting as a person reads it, one line each: `X402_PAY_TO: must be a 0x-prefixed 20-byte hex address` —
 * the variable named once (a rule names it and the reader adds it to the path), no parser's words around it.
 */
export const describeConfigError = (error: ConfigError.ConfigError): ReadonlyArray<string> => {
  const lines = leavesOf(error).map(({ path, message }) => {
    // A redacted value's rule may come without its path; the rule then names the variable itself.
    const name = path.filter((part, i) => part !== path[i - 1]).at(-1) ?? /^[A-Z][A-Z0-9_]+(?= )/.exec(message)?.[0] ?? ""
    const said = message.startsWith(`${name} `) ? message.slice(name.length + 1).replace(/^is /, "") : message
    const words = PARSER_WORDS.reduce<string | undefined>((found, [pattern, rule]) => found ?? (pattern.test(said) ? rule(...(pattern.exec(said)?.slice(1) ?? [])) : undefined), undefined)
    return name === "" ? (words ?? said) : `${name}: ${words ?? said}`
  })
  return [...new Set(lines)]
}

export class AppConfig extends Context.Tag("morsel/AppConfig")<AppConfig, Settings>() {}

/** Settings from the process environment. */
export const AppConfigLive = Layer.effect(
  AppConfig,
  Effect.suspend(() => loadSettings.pipe(Effect.withConfigProvider(providerOf(process.env))))
)

/** Settings from an explicit variable map instead of the process environment (tests, embedding). */
export const AppConfigFromEnv = (env: Readonly<Record<string, string>>) =>
  Layer.effect(AppConfig, loadSettings.pipe(Effect.withConfigProvider(providerOf(env))))
