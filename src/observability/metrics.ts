/** The service's metrics as Effect Metrics, served in the Prometheus text format (0.0.4) at `GET /metrics` when METRICS=on. */
import { HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Cause, Effect, Exit, Layer, Metric, MetricBoundaries, MetricLabel, type MetricPair, MetricState, Option } from "effect"
import { AppConfig } from "../config.ts"
import { countRows } from "../db/rows.ts"

const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

export const httpRequests = counter("morsel_http_requests_total", "HTTP requests answered, by route and status")
export const analysisDuration = Metric.histogram(
  "morsel_analysis_duration_seconds",
  MetricBoundaries.fromIterable([0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 45, 60]),
  "Time from the start of an analysis to its answer, payment settlement excluded"
)
export const analyses = counter("morsel_analyses_total", "Analyses started, by outcome")
export const creditsGranted = counter("morsel_credits_granted_total", "Credits granted by paid card checkouts")
export const creditsConsumed = counter("morsel_credits_consumed_total", "Credits consumed by successful analyses")
export const x402Settlements = counter("morsel_x402_settlements_total", "x402 payments submitted for settlement, by outcome")
export const fastLaneAnswers = counter("morsel_fast_lane_answers_total", "Challenges and replays answered before the HttpApi stack, by answer")
export const modelTokens = counter("morsel_model_tokens_total", "Tokens the vision model provider reported, by kind (prompt, completion, reasoning, cached)")
export const modelDuration = Metric.histogram(
  "morsel_model_duration_seconds",
  MetricBoundaries.fromIterable([0.25, 0.5, 1, 2, 4, 8, 15, 30, 45, 60]),
  "Time of the vision model call alone (retries included), apart from the rest of the analysis"
)
export const modelCost = Metric.counter("morsel_model_cost_usd_total", {
  description: "Cost of vision model calls in USD at the MODEL_PRICE_* settings (absent without them)"
})
export const x402Pending = Metric.gauge("morsel_x402_pending", { description: "x402 payments awaiting confirmation on chain" })
export const settlerBalance = Metric.gauge("morsel_x402_settler_balance_wei", {
  description: "ETH (in wei) of the self-settlement wallet, which pays the gas of every x402 transfer"
})

/** The outcome label of a finished operation: `success` on success, else its error code (`internal_error` for a defect). */
export const outcomeOf = <A, E extends { readonly error: { readonly code: string } }>(exit: Exit.Exit<A, E>, success: string) =>
  Exit.match(exit, {
    onSuccess: () => success,
    onFailure: (cause) => Option.match(Cause.failureOption(cause), { onNone: () => "internal_error", onSome: (e) => e.error.code })
  })

/** Each counter with each set of labels it was counted with, made once: a count does not build and hash its key again. */
const taggings = new WeakMap<Metric.Metric.Counter<number>, Map<string, Metric.Metric.Counter<number>>>()
const tagged = (metric: Metric.Metric.Counter<number>, labels: Readonly<Record<string, string>>) => {
  const byLabels = taggings.get(metric) ?? new Map<string, Metric.Metric.Counter<number>>()
  taggings.set(metric, byLabels)
  const key = JSON.stringify(labels)
  const known = byLabels.get(key)
  if (known !== undefined) return known
  const made = Metric.taggedWithLabels(metric, Object.entries(labels).map(([name, value]) => MetricLabel.make(name, value)))
  byLabels.set(key, made)
  return made
}

/** Counts one event of a labelled counter. */
export const count = (metric: Metric.Metric.Counter<number>, labels: Readonly<Record<string, string>> = {}) => Metric.increment(tagged(metric, labels))

/** The same, at once and outside any fiber: for answers given in plain Node (the lanes). */
export const countNow = (metric: Metric.Metric.Counter<number>, labels: Readonly<Record<string, string>> = {}) => tagged(metric, labels).unsafeUpdate(1, [])

// ---- Prometheus text exposition ----

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")
const labelText = (labels: ReadonlyArray<readonly [string, string]>) =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`
const numberText = (n: number) => (n === Number.POSITIVE_INFINITY ? "+Inf" : Number.isFinite(n) ? String(n) : "NaN")

const typeOf = (pair: MetricPair.MetricPair.Untyped): string | undefined => {
  const state = pair.metricState
  if (MetricState.isCounterState(state)) return "counter"
  if (MetricState.isGaugeState(state)) return "gauge"
  if (MetricState.isHistogramState(state)) return "histogram"
  return undefined
}

const sampleLines = (pair: MetricPair.MetricPair.Untyped): Array<string> => {
  const name = pair.metricKey.name
  const labels = pair.metricKey.tags.map((tag) => [tag.key, tag.value] as const)
  const state = pair.metricState
  if (MetricState.isCounterState(state)) return [`${name}${labelText(labels)} ${numberText(Number(state.count))}`]
  if (MetricState.isGaugeState(state)) return [`${name}${labelText(labels)} ${numberText(Number(state.value))}`]
  if (MetricState.isHistogramState(state)) {
    const buckets = state.buckets.filter(([bound]) => bound !== Number.POSITIVE_INFINITY)
    return [
      ...buckets.map(([bound, cumulative]) => `${name}_bucket${labelText([...labels, ["le", numberText(bound)]])} ${cumulative}`),
      `${name}_bucket${labelText([...labels, ["le", "+Inf"]])} ${state.count}`,
      `${name}_sum${labelText(labels)} ${state.sum}`,
      `${name}_count${labelText(labels)} ${state.count}`
    ]
  }
  return []
}

/** Renders a snapshot of Effect's metric registry: one HELP and TYPE per name, then every labelled sample. */
export const renderPrometheus = (pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>): string => {
  const byName = new Map<string, Array<MetricPair.MetricPair.Untyped>>()
  for (const pair of pairs) {
    if (!pair.metricKey.name.startsWith("morsel_") || typeOf(pair) === undefined) continue
    byName.set(pair.metricKey.name, [...(byName.get(pair.metricKey.name) ?? []), pair])
  }
  const lines: Array<string> = []
  for (const [name, group] of [...byName].sort(([a], [b]) => a.localeCompare(b))) {
    const description = Option.getOrElse(group[0]!.metricKey.description, () => name)
    lines.push(`# HELP ${name} ${description}`, `# TYPE ${name} ${typeOf(group[0]!)}`)
    for (const pair of group) lines.push(...sampleLines(pair))
  }
  return `${lines.join("\n")}\n`
}

/** Route names as declared, so that ids in paths do not make a label per request. */
const routeOf = (path: string): string => {
  if (path.startsWith("/sandbox/checkout/")) return "/sandbox/checkout/{session_id}"
  if (path.startsWith("/sandbox/wallets/")) return "/sandbox/wallets/{address}"
  return KNOWN_ROUTES.has(path) ? path : "other"
}
const KNOWN_ROUTES = new Set([
  "/",
  "/health",
  "/v1/analyze",
  "/v1/credits/balance",
  "/v1/credits/checkout",
  "/v1/credits/confirm",
  "/v1/credits/checkout-status",
  "/v1/credits/feedback",
  "/webhooks/stripe",
  "/mcp",
  "/admin/rpc",
  "/docs",
  "/openapi.json",
  "/metrics",
  "/checkout/success",
  "/checkout/cancel"
])

/** Counts every answer by route and status. */
const CountRequests = HttpLayerRouter.middleware(
  (app) =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const response = yield* app
      yield* count(httpRequests, { route: routeOf(request.url.split("?")[0]!), status: String(response.status) })
      return response
    }),
  { global: true }
)

const pendingPayments = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  countRows(sql`SELECT count(*)::int AS n FROM x402_payments WHERE state = 'submitted'`).pipe(
    Effect.map((rows) => rows[0]?.n ?? 0)
  )
)

/** `GET /metrics`; the pending gauge is read from the database, so it is the same on every instance. */
const MetricsEndpoint = HttpLayerRouter.add(
  "GET",
  "/metrics",
  Effect.gen(function* () {
    const pending = yield* pendingPayments.pipe(Effect.option)
    if (Option.isSome(pending)) yield* Metric.set(x402Pending, pending.value)
    const body = renderPrometheus(yield* Metric.snapshot)
    return HttpServerResponse.text(body, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
  })
)

/** The metrics routes when METRICS=on; nothing (a 404 at /metrics) otherwise. */
export const MetricsRoutes = Layer.unwrapEffect(
  Effect.gen(function* () {
    const settings = yield* AppConfig
    if (!settings.metrics) return Layer.empty
    // Counters without labels are shown from the start, at zero.
    yield* Effect.all([Metric.incrementBy(creditsGranted, 0), Metric.incrementBy(creditsConsumed, 0), Metric.set(x402Pending, 0)])
    return Layer.merge(MetricsEndpoint, CountRequests)
  })
)
