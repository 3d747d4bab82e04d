/** What one vision model call used and cost: tokens from the provider's `usage`, the time it took, and the price settings applied. */
import { Effect, Metric, Option } from "effect"
import type { CompletionUsage } from "openai/resources/completions"
import { modelCost, modelDuration, modelTokens } from "../observability/metrics.ts"
import type { ModelPrices } from "./settings.ts"

/** Token counts as the provider reported them; a count it did not report stays absent. */
export interface TokenUsage {
  readonly prompt?: number
  readonly completion?: number
  /** Part of `completion` (billed as output). */
  readonly reasoning?: number
  /** Part of `prompt` (billed at the cached-input price). */
  readonly cached?: number
}

/** How the answer was asked for: strict structured output, JSON mode with the schema in the instruction, or plain text. */
export type OutputMode = "json_schema" | "json_object" | "text"

/** One analysis's model call, as kept in its log line, the metrics and its stored request. */
export interface ModelCall {
  readonly tokens: TokenUsage
  readonly seconds: number
  readonly output: OutputMode
  /** USD at the price settings; absent without prices or without the token counts a cost needs. */
  readonly costUsd?: number
  /** Optional parameters the server refused, no longer sent (`reasoning_effort`, `max_completion_tokens`, `detail`). */
  readonly dropped?: ReadonlyArray<string>
}

const count0 = (n: unknown): number | undefined => (typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : undefined)

/** The counts of a completion's `usage`, keeping only those present. */
export const tokensOf = (usage: CompletionUsage | null | undefined): TokenUsage => {
  if (usage === null || usage === undefined) return {}
  const entries = {
    prompt: count0(usage.prompt_tokens),
    completion: count0(usage.completion_tokens),
    reasoning: count0(usage.completion_tokens_details?.reasoning_tokens),
    cached: count0(usage.prompt_tokens_details?.cached_tokens)
  }
  return Object.fromEntries(Object.entries(entries).filter(([, n]) => n !== undefined))
}

/** USD for these tokens: uncached prompt at the input price, cached prompt at the cached price, completion (reasoning included) at the output price. */
export const costOf = (tokens: TokenUsage, prices: ModelPrices): number | undefined => {
  if (tokens.prompt === undefined || tokens.completion === undefined) return undefined
  const cached = Math.min(tokens.cached ?? 0, tokens.prompt)
  const usd = ((tokens.prompt - cached) * prices.inputPerMTok + cached * prices.cachedInputPerMTok + tokens.completion * prices.outputPerMTok) / 1_000_000
  return Math.round(usd * 1e10) / 1e10
}

export const modelCallOf = (
  tokens: TokenUsage,
  seconds: number,
  output: OutputMode,
  prices: Option.Option<ModelPrices>,
  dropped: ReadonlyArray<string> = []
): ModelCall => {
  const costUsd = Option.match(prices, { onNone: () => undefined, onSome: (p) => costOf(tokens, p) })
  return { tokens, seconds, output, ...(costUsd === undefined ? {} : { costUsd }), ...(dropped.length === 0 ? {} : { dropped }) }
}

/** A call's figures as log annotations: `model_prompt_tokens`, …, `model_cost_usd` (absent ones left out). */
export const logFieldsOf = (call: ModelCall): Record<string, number | string> => ({
  ...Object.fromEntries(Object.entries(call.tokens).map(([kind, n]) => [`model_${kind}_tokens`, n])),
  model_seconds: Math.round(call.seconds * 1000) / 1000,
  model_output: call.output,
  ...(call.costUsd === undefined ? {} : { model_cost_usd: call.costUsd })
})

/** Adds one call to `morsel_model_tokens_total{kind}`, `morsel_model_duration_seconds` and (with prices) `morsel_model_cost_usd_total`. */
export const recordMetrics = (call: ModelCall) =>
  Effect.all(
    [
      ...Object.entries(call.tokens).map(([kind, n]) =>
        Metric.incrementBy(Metric.tagged(modelTokens, "kind", kind), n)
      ),
      Metric.update(modelDuration, call.seconds),
      ...(call.costUsd === undefined ? [] : [Metric.incrementBy(modelCost, call.costUsd)])
    ],
    { discard: true }
  )

/** "1,234 prompt (0 cached), 321 completion (192 reasoning)"; "not reported" when the provider sent no usage. */
export const describeTokens = (tokens: TokenUsage): string => {
  const n = (v: number) => v.toLocaleString("en-US")
  const parts: Array<string> = []
  if (tokens.prompt !== undefined) parts.push(`${n(tokens.prompt)} prompt${tokens.cached === undefined ? "" : ` (${n(tokens.cached)} cached)`}`)
  else if (tokens.cached !== undefined) parts.push(`${n(tokens.cached)} cached prompt`)
  if (tokens.completion !== undefined) parts.push(`${n(tokens.completion)} completion${tokens.reasoning === undefined ? "" : ` (${n(tokens.reasoning)} reasoning)`}`)
  else if (tokens.reasoning !== undefined) parts.push(`${n(tokens.reasoning)} reasoning`)
  return parts.length === 0 ? "not reported by the server" : parts.join(", ")
}

/** USD with enough digits for a fraction of a cent: 0.000734 USD. */
export const formatUsd = (usd: number): string => `${usd < 0 ? "-" : ""}${Math.abs(usd).toFixed(6)} USD`

/** What one paid analysis earns (SPEC: 0.01 USDC over x402, one credit of a 0.01 USD pack price). */
export const ANALYSIS_PRICE_USD = 0.01

/** Sums of USD amounts without float noise (to a hundred-millionth of a cent). */
export const roundUsd = (usd: number): number => Math.round(usd * 1e10) / 1e10
