/**
 * `morsel model check`: one call to the configured vision model with a photo, through the same pipeline an analysis
 * uses (the shipped foods stand in for the database), and one verdict. Nothing is charged and no database is opened.
 */
import { randomUUID } from "node:crypto"
import { Cause, Console, Effect, Exit, Layer, Option, Ref } from "effect"
import { type AnalysisInput, Analyzer, AnalyzerLive } from "../analysis/Analyzer.ts"
import { VisionModelLive } from "../analysis/VisionModelLive.ts"
import { preparePhoto } from "../client/photo.node.ts"
import { cliFailureOf } from "./client.ts"
import { describeResult, printJson } from "./output.ts"
import { AppConfig } from "../config.ts"
import { RequestId } from "../domain/ids.ts"
import type { AnalysisResult } from "../domain/schemas.ts"
import { shippedFoods } from "../foods/core/shipped.ts"
import { FoodDbMemory } from "../foods/core/FoodDbLive.ts"
import { CHECK_PHOTO } from "./modelCheckPhoto.ts"
import { diagnose } from "../model/diagnose.ts"
import { describeModelCall } from "../model/settings.ts"
import { ANALYSIS_PRICE_USD, describeTokens, formatUsd, type ModelCall } from "../model/usage.ts"

export interface CheckOptions {
  readonly photo: Option.Option<string>
  readonly json: boolean
  /** Adds the system's own words for a failure (`--verbose`, which the command line takes anywhere). */
  readonly verbose: boolean
}

export type Verdict =
  | { readonly works: true; readonly fallback: Option.Option<string> }
  | { readonly works: false; readonly why: string; readonly detail?: string }

const OUTPUT_WORDS: Record<ModelCall["output"], string> = {
  json_schema: "accepted (strict json_schema)",
  json_object: "refused; answered in JSON mode (json_object) with the schema in the instruction",
  text: "refused, and JSON mode too; answered in plain text with the schema in the instruction"
}

/** What made a working model work differently from the request as configured, if anything. */
const fallbackOf = (call: ModelCall | undefined): Option.Option<string> => {
  if (call === undefined) return Option.none()
  const parts = [
    ...(call.output === "json_schema" ? [] : [`the server refused strict structured output, so analyses ask in ${call.output === "json_object" ? "JSON mode" : "plain text"}`]),
    ...(call.dropped ?? []).map((parameter) => `the model refused ${parameter}, so it is not sent`)
  ]
  return parts.length === 0 ? Option.none() : Option.some(parts.join("; "))
}

export const verdictLine = (verdict: Verdict): string =>
  verdict.works
    ? Option.match(verdict.fallback, {
        onNone: () => "verdict: works — analyses will be served as configured",
        onSome: (fallback) => `verdict: works with a fallback — ${fallback}`
      })
    : `verdict: does not work — ${verdict.why}`

const hostOf = (url: string) => (URL.canParse(url) ? new URL(url).host : url)

/**
 * A failed call's message with its cause and fix: "could not reach" is retraced (unknown host, refused connection,
 * TLS), a refused key and a server too slow are named with the setting to change.
 */
const explain = (message: string, server: string, timeoutMs: number): Effect.Effect<{ readonly why: string; readonly detail?: string }> => {
  if (/could not reach/.test(message)) {
    return Effect.map(Effect.promise(() => diagnose(server)), (found) => ({ why: found.why, detail: `${message}; ${found.detail}` }))
  }
  if (/HTTP 401\b/.test(message)) {
    return Effect.succeed({ why: `${hostOf(server)} refused the key (HTTP 401): check OPENAI_API_KEY, and that it is a key of this server`, detail: message })
  }
  if (/HTTP 404\b/.test(message) && /model/.test(message)) {
    return Effect.succeed({ why: `${message}: check VISION_MODEL against the models this server offers`, detail: message })
  }
  if (/longer than|did not answer in time/.test(message)) {
    return Effect.succeed({
      why: `${hostOf(server)} took the request but did not answer within ${timeoutMs} ms: a slow or stuck model server (ANALYSIS_TIMEOUT_MS gives it longer)`,
      detail: message
    })
  }
  return Effect.succeed({ why: message })
}

/** Runs the check and prints it; the process exits 1 when the model does not work. */
export const runCheck = (options: CheckOptions) =>
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const server = Option.getOrElse(settings.openai.baseUrl, () => "https://api.openai.com/v1")
    const photo = yield* Option.match(options.photo, {
      onNone: () => Effect.succeed({ bytes: Buffer.from(CHECK_PHOTO.base64, "base64"), mime: "image/jpeg" as const, name: CHECK_PHOTO.name, change: undefined }),
      onSome: (path) =>
        Effect.map(Effect.tryPromise({ try: () => preparePhoto(path), catch: (error) => cliFailureOf("", error) }), (prepared) => ({ ...prepared, name: path }))
    })
    const seen = yield* Ref.make<ModelCall | undefined>(undefined)
    const input: AnalysisInput = {
      requestId: RequestId.make(randomUUID()),
      image: new Uint8Array(photo.bytes),
      mime: photo.mime,
      language: "en",
      knownTotalGrams: undefined,
      onModelCall: (call) => Ref.set(seen, call)
    }
    const exit = yield* Effect.exit(Effect.flatMap(Analyzer, (analyzer) => analyzer.run(input)))
    const call = yield* Ref.get(seen)
    const noKey = Option.isNone(settings.openai.apiKey)
    const verdict: Verdict = noKey
      ? { works: false, why: "OPENAI_API_KEY is unset, so analyses answer 503 model_unavailable" }
      : yield* Exit.match(exit, {
          onSuccess: () => Effect.succeed<Verdict>({ works: true, fallback: fallbackOf(call) }),
          onFailure: (cause) => {
            const rejected = Option.getOrUndefined(Cause.failureOption(cause))
            if (rejected?.error._tag === "NoFoodDetected") return Effect.succeed<Verdict>({ works: true, fallback: fallbackOf(call) })
            if (rejected === undefined) return Effect.succeed<Verdict>({ works: false, why: "the check itself failed unexpectedly", detail: Cause.pretty(cause) })
            return Effect.map(explain(rejected.error.error.message, server, settings.analysisTimeoutMs), (explained): Verdict => ({ works: false, ...explained }))
          }
        })
    const detail = verdict.works || !options.verbose ? undefined : verdict.detail
    const result: AnalysisResult | undefined = Exit.isSuccess(exit) ? exit.value : undefined
    const price = Option.isSome(settings.openai.call.prices) && call?.costUsd !== undefined ? call.costUsd : undefined
    if (options.json) {
      yield* printJson({
        model: settings.openai.model,
        server: hostOf(server),
        settings: describeModelCall(settings.openai.call),
        photo: photo.name,
        structured_output: call?.output ?? null,
        dropped_parameters: call?.dropped ?? [],
        latency_seconds: call?.seconds ?? null,
        tokens: call?.tokens ?? null,
        ...(price === undefined ? {} : { cost_usd: price, margin_usd: ANALYSIS_PRICE_USD - price }),
        result: result ?? null,
        verdict: verdict.works
          ? { works: true, fallback: Option.getOrNull(verdict.fallback), line: verdictLine(verdict) }
          : { works: false, why: verdict.why, ...(detail === undefined ? {} : { detail }), line: verdictLine(verdict) }
      })
    } else {
      const rows: Array<readonly [string, string]> = [
        ["model", `${settings.openai.model} at ${hostOf(server)}`],
        ["settings", describeModelCall(settings.openai.call)],
        ["photo", photo.change ?? photo.name],
        ["structured output", call === undefined ? "no answer came back" : OUTPUT_WORDS[call.output]],
        ["latency", call === undefined ? "—" : `${call.seconds.toFixed(2)} s`],
        ["tokens", call === undefined ? "—" : describeTokens(call.tokens)],
        ...(price === undefined
          ? []
          : [["cost", `${formatUsd(price)}, of the ${ANALYSIS_PRICE_USD} USD an analysis earns (margin ${formatUsd(ANALYSIS_PRICE_USD - price)})`] as const])
      ]
      const width = Math.max(...rows.map(([name]) => name.length))
      yield* Console.log(rows.map(([name, text]) => `${name.padEnd(width)}  ${text}`).join("\n"))
      if (result !== undefined) yield* Console.log(`\n${describeResult(result)}`)
      yield* Console.log(`\n${verdictLine(verdict)}`)
      if (detail !== undefined) yield* Console.log(`cause: ${detail}`)
    }
    if (!verdict.works) process.exitCode = 1
  }).pipe(
    Effect.provide(
      AnalyzerLive.pipe(Layer.provide(Layer.mergeAll(VisionModelLive, FoodDbMemory(shippedFoods()))))
    )
  )
