/**
 * What a model server refused, read from its answer (never from its name): a parameter it does not take, or strict
 * structured output (`response_format` of type `json_schema`) it cannot honour.
 */
import OpenAI from "openai"

/** The optional parameters morsel stops sending when the server refuses them, each named as the API names it. */
export type DroppableParameter = "reasoning_effort" | "max_completion_tokens" | "detail"

/** The text of an error answer: its message, `param` and `code`, whichever the server filled in. */
const textOf = (error: InstanceType<typeof OpenAI.APIError>): string => {
  const body = typeof error.error === "object" && error.error !== null ? (error.error as Record<string, unknown>) : {}
  return [body["message"], error.param, error.code, body["type"]].filter((part) => typeof part === "string").join(" ")
}

const PARAMETER_PATTERNS: ReadonlyArray<readonly [DroppableParameter, RegExp]> = [
  ["reasoning_effort", /reasoning[_ .]effort|\breasoning\b/i],
  ["max_completion_tokens", /max_completion_tokens/i],
  ["detail", /image_url\.detail|\bdetail\b/i]
]

/**
 * The sent optional parameter a 400/422 answer names, e.g. OpenAI's `Unsupported parameter: 'reasoning_effort' is not
 * supported with this model.` (`param: "reasoning_effort"`). Undefined when the answer names none of those sent.
 */
export const refusedParameter = (error: unknown, sent: ReadonlyArray<DroppableParameter>): DroppableParameter | undefined => {
  if (!(error instanceof OpenAI.APIError) || (error.status !== 400 && error.status !== 422)) return undefined
  const text = textOf(error)
  // A refusal of the structured output is decided below, not taken for a refused parameter.
  if (/response_format|json_schema/i.test(text)) return undefined
  return PARAMETER_PATTERNS.find(([name, pattern]) => sent.includes(name) && pattern.test(text))?.[0]
}

/**
 * Whether the answer refuses the requested structured output. Servers answer this differently: OpenAI and Ollama with
 * 400 `invalid_request_error`, vLLM with 400 `BadRequestError` ("… JSON schema … not supported …"), older llama.cpp
 * servers with HTTP 500 `server_error` ("response_format type must be one of \"text\" or \"json_object\", but got:
 * json_schema"). The text must name the structured output; any other 5xx stays a provider failure worth a retry.
 */
export const refusesStructuredOutput = (error: unknown): boolean => {
  if (!(error instanceof OpenAI.APIError) || typeof error.status !== "number") return false
  if (![400, 422, 500, 501].includes(error.status)) return false
  return /response_format|json_schema|json schema|json_object|structured output|grammar/i.test(textOf(error))
}

/** The server's own words, clipped, for one log line; never for a 401 (its text may echo part of a key). */
export const serverWords = (error: unknown): string => {
  if (!(error instanceof OpenAI.APIError)) return "no answer"
  const text = error.status === 401 ? "" : textOf(error)
  const clipped = text.length > 200 ? `${text.slice(0, 200)}…` : text
  return `HTTP ${error.status}${clipped === "" ? "" : `: ${clipped}`}`
}
