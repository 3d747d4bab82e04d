/**
 * What a model server refused, read from its answer (never from its name): a parameter it does not take, or strict
 * structured output (`response_format` of type `json_schema`) it cannot honour.
 */
import OpenAI from "openai"

/** The optional parameters morsel stops sending when the server refuses them, each named as the API names it. */
export type DroppableParameter = "reasoning_effort" | "max_completion_tokens" | "detail"

/** The message of an error answer, or "" when it has none. */
const messageOf = (error: InstanceType<typeof OpenAI.APIError>): string => {
  const body = typeof error.error === "object" && error.error !== null ? (error.error as Record<string, unknown>) : {}
  return typeof body["message"] === "string" ? body["message"] : ""
}

/** The text of an error answer: its message, `param` and `code`, whichever the server filled in. */
const textOf = (error: InstanceType<typeof OpenAI.APIError>): string => {
  const body = typeof error.error === "object" && error.error !== null ? (error.error as Record<string, unknown>) : {}
  return [body["message"], error.param, error.code, body["type"]].filter((part) => typeof part === "string").join(" ")
}

/**
 * How an answer without `param` names each parameter: the whole name (the image's detail only with its path or
 * quoted), never a word that merely appears in it ("reasoning", "detail").
 */
const PARAMETER_NAMES: ReadonlyArray<readonly [DroppableParameter, RegExp]> = [
  ["reasoning_effort", /(?<![\w.])reasoning_effort(?!\w)/],
  ["max_completion_tokens", /(?<![\w.])max_completion_tokens(?!\w)/],
  ["detail", /image_url\.detail(?!\w)|['"`]detail['"`]/]
]

/** Words of a server saying it does not take a parameter at all (not that its value is too large, say). */
const NOT_TAKEN = /unsupported|not supported|does not support|unrecognized|unrecognised|unknown|not allowed|not permitted|extra inputs|extra fields|invalid parameter/i

/** `param` as servers fill it: the name itself, or its path (`messages[0].content[1].image_url.detail`). */
const namedBy = (param: string, name: DroppableParameter) => param === name || param.endsWith(`.${name}`)

/**
 * The sent optional parameter a 400/422 answer refuses, e.g. OpenAI's `Unsupported parameter: 'reasoning_effort' is
 * not supported with this model.` (`param: "reasoning_effort"`). The `param` the server names decides; without one,
 * the message must name the parameter whole and say it is not taken. Undefined otherwise: that answer fails its
 * analysis alone, and the parameter (the output-token cap above all) is still sent.
 */
export const refusedParameter = (error: unknown, sent: ReadonlyArray<DroppableParameter>): DroppableParameter | undefined => {
  if (!(error instanceof OpenAI.APIError) || (error.status !== 400 && error.status !== 422)) return undefined
  const text = textOf(error)
  // A refusal of the structured output is decided below, not taken for a refused parameter.
  if (/response_format|json_schema/i.test(text)) return undefined
  const param = typeof error.param === "string" && error.param !== "" ? error.param : undefined
  if (param !== undefined) return sent.find((name) => namedBy(param, name))
  const message = messageOf(error)
  if (!NOT_TAKEN.test(message)) return undefined
  return PARAMETER_NAMES.find(([name, pattern]) => sent.includes(name) && pattern.test(message))?.[0]
}

/**
 * Whether the answer refuses the requested structured output. Servers answer this differently: OpenAI and Ollama with
 * 400 `invalid_request_error`, vLLM with 400 `BadRequestError` ("… JSON schema … not supported …"), older llama.cpp
 * servers with HTTP 500 `server_error` ("response_format type must be one of \"text\" or \"json_object\", but got:
 * json_schema"). The text must name the structured output; any other 5xx stays a provider failure worth a retry, and
 * any other 400 fails its analysis alone.
 */
export const refusesStructuredOutput = (error: unknown): boolean => {
  if (!(error instanceof OpenAI.APIError) || typeof error.status !== "number") return false
  if (![400, 422, 500, 501].includes(error.status)) return false
  // Named by what was asked for, not by a word such as "grammar" that any template or parser error may hold.
  return /response_format|json_schema|json schema|json_object|structured output/i.test(textOf(error))
}

/** The server's own words, clipped, for one log line; never for a 401 (its text may echo part of a key). */
export const serverWords = (error: unknown): string => {
  if (!(error instanceof OpenAI.APIError)) return "no answer"
  const text = error.status === 401 ? "" : textOf(error)
  const clipped = text.length > 200 ? `${text.slice(0, 200)}…` : text
  return `HTTP ${error.status}${clipped === "" ? "" : `: ${clipped}`}`
}
