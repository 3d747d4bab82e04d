/** A small OpenAI-compatible Chat Completions server on 127.0.0.1 for tests: scripted replies in, recorded requests out. */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http"
import { Effect, type Scope } from "effect"
import { imageSize } from "image-size"
import { closeServer, readBody } from "./http.ts"

/**
 * One scripted reply to one `POST …/chat/completions`. Build them with `Reply.*`. Every reply may wait
 * `delayMs` of real time first; if the client goes away meanwhile the request is recorded as aborted.
 */
export type FakeReply =
  | {
      readonly kind: "completion"
      readonly content: string | null
      readonly refusal: string | null
      readonly finishReason: "stop" | "length" | "content_filter"
      readonly delayMs: number
      /** The `usage` object sent (null: none); undefined: counted as gpt-5-mini would (see `usageFor`). */
      readonly usage?: unknown
    }
  | { readonly kind: "status"; readonly status: number; readonly body: unknown; readonly delayMs: number }
  /** Never answers; the request ends only when the client aborts (or the server stops). */
  | { readonly kind: "hang" }
  /** Destroys the socket without an answer: the client sees a connection error. */
  | { readonly kind: "drop"; readonly delayMs: number }

interface DelayOption {
  readonly delayMs?: number
}

interface UsageOption {
  /** The `usage` object to send as it is; null sends none. */
  readonly usage?: unknown
}

export const Reply = {
  /** A normal completion whose message content is `JSON.stringify(answer)`. */
  answer: (answer: unknown, options?: DelayOption & UsageOption): FakeReply => Reply.content(JSON.stringify(answer), options),
  /** A completion with this exact message content (e.g. text that is not JSON). */
  content: (
    content: string | null,
    options?: DelayOption & UsageOption & { readonly finishReason?: "stop" | "length" | "content_filter" }
  ): FakeReply => ({
    kind: "completion",
    content,
    refusal: null,
    finishReason: options?.finishReason ?? "stop",
    delayMs: options?.delayMs ?? 0,
    ...(options !== undefined && "usage" in options ? { usage: options.usage } : {})
  }),
  /** A structured-outputs refusal: `message.refusal` set, `content` null. */
  refusal: (text = "I'm sorry, I can't help with that request.", options?: DelayOption): FakeReply => ({
    kind: "completion",
    content: null,
    refusal: text,
    finishReason: "stop",
    delayMs: options?.delayMs ?? 0
  }),
  /** The provider's content filter stopped the answer. */
  contentFilter: (options?: DelayOption): FakeReply => Reply.content(null, { ...options, finishReason: "content_filter" }),
  /** An HTTP error with OpenAI's error body `{ error: { message, type, param, code } }`. */
  status: (status: number, options?: DelayOption & { readonly message?: string; readonly code?: string }): FakeReply => ({
    kind: "status",
    status,
    body: {
      error: {
        message: options?.message ?? `fake OpenAI scripted HTTP ${status}`,
        type: status >= 500 ? "server_error" : "invalid_request_error",
        param: null,
        code: options?.code ?? null
      }
    },
    delayMs: options?.delayMs ?? 0
  }),
  hang: (): FakeReply => ({ kind: "hang" }),
  drop: (options?: DelayOption): FakeReply => ({ kind: "drop", delayMs: options?.delayMs ?? 0 })
} as const

/**
 * How servers that cannot honour strict structured output answer a request for it, as their projects document or
 * report it. The fake answers so, without using a scripted reply, whenever `response_format.type` is `json_schema`.
 * - `openai`: a model without structured outputs, 400 `invalid_request_error` naming `response_format`.
 * - `vllm`: 400 with vLLM's `BadRequestError` body (vllm-project/vllm#12886, #35438) when its guided-decoding
 *   backend cannot take the schema.
 * - `ollama`: 400 with the OpenAI-style body of Ollama's compatibility layer, message from ollama/ollama#8126.
 * - `llamacpp`: HTTP 500 `server_error` of llama.cpp's server before json_schema support (ggml-org/llama.cpp#9522).
 */
export type StructuredOutputRefusal = "openai" | "vllm" | "ollama" | "llamacpp"

const STRUCTURED_OUTPUT_REFUSALS: Record<StructuredOutputRefusal, { readonly status: number; readonly body: unknown }> = {
  openai: {
    status: 400,
    body: {
      error: {
        message: "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
        type: "invalid_request_error",
        param: "response_format",
        code: null
      }
    }
  },
  vllm: {
    status: 400,
    body: {
      error: {
        message: "The provided JSON schema contains features not supported by xgrammar.",
        type: "BadRequestError",
        param: null,
        code: 400
      }
    }
  },
  ollama: {
    status: 400,
    body: { error: { message: 'invalid format: expected "json" or a JSON schema', type: "invalid_request_error", param: null, code: null } }
  },
  llamacpp: {
    status: 500,
    body: { error: { code: 500, message: 'response_format type must be one of "text" or "json_object", but got: json_schema', type: "server_error" } }
  }
}

/** OpenAI's answer to a parameter the model does not take, e.g. `reasoning_effort` sent to a non-reasoning model. */
const unsupportedParameter = (name: string) => ({
  error: {
    message: `Unsupported parameter: '${name}' is not supported with this model.`,
    type: "invalid_request_error",
    param: name,
    code: "unsupported_parameter"
  }
})

/** Image tokens by OpenAI's published rule for gpt-5-mini: 32 px patches (at most 1,536) × 1.62. */
export const imageTokens = (width: number, height: number): number => {
  let patches = Math.ceil(width / 32) * Math.ceil(height / 32)
  if (patches > 1536) {
    const shrink = Math.sqrt((1536 * 32 * 32) / (width * height))
    patches = Math.min(1536, Math.ceil((width * shrink) / 32) * Math.ceil((height * shrink) / 32))
  }
  return Math.ceil(patches * 1.62)
}

/** Text tokens at about four characters a token, the usual rule of thumb for English. */
const textTokens = (text: string) => Math.ceil(text.length / 4)

/**
 * The `usage` gpt-5-mini would report for this request and answer: prompt = instruction text + image tokens by the
 * published rule, completion = the answer's text (a fake does not reason: 0 reasoning tokens), nothing cached.
 */
export const usageFor = (userText: string, imageUrls: ReadonlyArray<string>, content: string | null) => {
  const images = imageUrls.reduce((sum, url) => {
    try {
      const { width, height } = imageSize(decodeDataUrl(url).bytes)
      return sum + imageTokens(width, height)
    } catch {
      return sum
    }
  }, 0)
  const prompt = textTokens(userText) + images
  const completion = textTokens(content ?? "")
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0 }
  }
}

/** What the fake saw of one request. */
export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  /** The parsed JSON body, or `undefined` when it was not JSON. */
  readonly body: unknown
  /** `body.model`. */
  readonly model: string | undefined
  /** `body.response_format`. */
  readonly responseFormat: unknown
  /** All text parts of all user messages, joined with newlines. */
  readonly userText: string
  /** All `image_url.url` values of user messages (data URLs when the image was inlined). */
  readonly imageUrls: ReadonlyArray<string>
  /** The reply used for it, or `undefined` when it was not a chat completion (404, 401). */
  readonly reply: FakeReply | undefined
  /** The client went away before the reply was complete (e.g. it aborted on a deadline). */
  readonly aborted: boolean
  /** The reply was fully sent, or the request ended by abort or drop. */
  readonly settled: boolean
}

export interface FakeOpenAI {
  /** Base URL to hand to the SDK or `OPENAI_BASE_URL`, e.g. `http://127.0.0.1:41234/v1`. */
  readonly url: string
  /** Appends replies to the queue; each chat completion request takes the next one. */
  readonly enqueue: (...replies: ReadonlyArray<FakeReply>) => void
  /**
   * The reply used when the queue is empty. Default: HTTP 400 `fake_queue_empty`, so a test that
   * scripted too few replies fails fast instead of retrying.
   */
  readonly setFallback: (reply: FakeReply) => void
  /** From now on answers every request for `json_schema` output as this kind of server refuses it. */
  readonly refuseStructuredOutput: (kind: StructuredOutputRefusal) => void
  /** From now on answers every request carrying this top-level parameter with OpenAI's 400 `unsupported_parameter`. */
  readonly refuseParameter: (name: string) => void
  /** Holds every reply (after its delay) until `resume`; requests are still recorded as they arrive. */
  readonly pause: () => void
  /** Sends the held replies and stops holding. */
  readonly resume: () => void
  /** Scripted replies not used yet. */
  readonly queued: () => number
  /** Every request received so far, in arrival order (live view). */
  readonly requests: ReadonlyArray<RecordedRequest>
  /** Completes once `condition` holds; re-checked whenever a request arrives or settles. */
  readonly waitUntil: (condition: () => boolean) => Effect.Effect<void>
  /** Completes once at least `n` requests have arrived. */
  readonly awaitRequests: (n: number) => Effect.Effect<void>
}

/** Decodes a `data:<mime>;base64,<data>` URL, e.g. to check with sharp what image the model received. */
export const decodeDataUrl = (url: string): { readonly mime: string; readonly bytes: Buffer } => {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url)
  if (!match) throw new Error(`not a base64 data URL: ${url.slice(0, 40)}…`)
  return { mime: match[1] ?? "", bytes: Buffer.from(match[2] ?? "", "base64") }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Pulls the user text and image URLs out of Chat Completions messages (string or content-part form). */
const userParts = (body: unknown): { text: string; imageUrls: Array<string> } => {
  const texts: Array<string> = []
  const imageUrls: Array<string> = []
  const messages = isRecord(body) && Array.isArray(body["messages"]) ? body["messages"] : []
  for (const message of messages) {
    if (!isRecord(message) || message["role"] !== "user") continue
    const content = message["content"]
    if (typeof content === "string") texts.push(content)
    if (!Array.isArray(content)) continue
    for (const part of content) {
      if (!isRecord(part)) continue
      if (part["type"] === "text" && typeof part["text"] === "string") texts.push(part["text"])
      const image = part["image_url"]
      if (part["type"] === "image_url" && isRecord(image) && typeof image["url"] === "string") imageUrls.push(image["url"])
    }
  }
  return { text: texts.join("\n"), imageUrls }
}


const sendJson = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

let completionCounter = 0

const completionBody = (reply: Extract<FakeReply, { kind: "completion" }>, record: RecordedRequest) => ({
  id: `chatcmpl-fake-${++completionCounter}`,
  object: "chat.completion",
  created: Math.floor(Date.now() / 1000),
  model: record.model ?? "fake-model",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: reply.content, refusal: reply.refusal, annotations: [] },
      logprobs: null,
      finish_reason: reply.finishReason
    }
  ],
  ...(reply.usage === null ? {} : { usage: reply.usage ?? usageFor(record.userText, record.imageUrls, reply.content) })
})

const QUEUE_EMPTY = Reply.status(400, { message: "fake OpenAI: no scripted reply left", code: "fake_queue_empty" })

/**
 * Starts the fake on a random port of 127.0.0.1; it stops (dropping open connections) when the scope closes.
 * Non-streaming chat completions only. Typical use: `const fake = yield* startFakeOpenAI()`,
 * `fake.enqueue(Reply.answer(meal))`, point the SDK or `OPENAI_BASE_URL` at `fake.url`, then inspect
 * `fake.requests`. Requests without a bearer key get 401; other paths get 404.
 */
export const startFakeOpenAI = (): Effect.Effect<FakeOpenAI, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ fake: FakeOpenAI; stop: () => Promise<void> }>((resume) => {
      const queue: Array<FakeReply> = []
      let fallback = QUEUE_EMPTY
      let structuredRefusal: StructuredOutputRefusal | undefined
      const refusedParameters = new Set<string>()
      /** The server's own refusal of what this request asks, before any scripted reply is used. */
      const refusalOf = (body: unknown): { status: number; body: unknown } | undefined => {
        if (!isRecord(body)) return undefined
        const refused = [...refusedParameters].find((name) => name in body)
        if (refused !== undefined) return { status: 400, body: unsupportedParameter(refused) }
        const format = body["response_format"]
        if (structuredRefusal !== undefined && isRecord(format) && format["type"] === "json_schema") return STRUCTURED_OUTPUT_REFUSALS[structuredRefusal]
        return undefined
      }
      const requests: Array<RecordedRequest> = []
      const waiters = new Set<() => void>()
      const timers = new Set<NodeJS.Timeout>()
      // While paused, replies that are due wait here until `resume` (concurrency tests without real sleeps).
      let paused = false
      const held = new Set<() => void>()
      const notify = () => {
        for (const waiter of [...waiters]) waiter()
      }

      const handle = async (req: IncomingMessage, res: ServerResponse) => {
        const raw = await readBody(req)
        let body: unknown
        try {
          body = JSON.parse(raw)
        } catch {
          body = undefined
        }
        const path = (req.url ?? "/").split("?")[0] ?? "/"
        const isCompletion = req.method === "POST" && path.endsWith("/chat/completions")
        const authorized = /^Bearer \S+/.test(req.headers.authorization ?? "")
        const refusal = isCompletion && authorized ? refusalOf(body) : undefined
        const reply =
          refusal !== undefined
            ? ({ kind: "status", status: refusal.status, body: refusal.body, delayMs: 0 } satisfies FakeReply)
            : isCompletion && authorized
              ? (queue.shift() ?? fallback)
              : undefined
        const { text, imageUrls } = userParts(body)
        const record = {
          method: req.method ?? "",
          path,
          headers: req.headers,
          body,
          model: isRecord(body) && typeof body["model"] === "string" ? body["model"] : undefined,
          responseFormat: isRecord(body) ? body["response_format"] : undefined,
          userText: text,
          imageUrls,
          reply,
          aborted: false,
          settled: false
        }
        requests.push(record)
        let timer: NodeJS.Timeout | undefined
        let pending: (() => void) | undefined
        res.on("close", () => {
          if (pending) held.delete(pending)
          if (timer) {
            clearTimeout(timer)
            timers.delete(timer)
          }
          // A dropped socket is the fake's own doing, not the client giving up.
          if (!res.writableFinished && reply?.kind !== "drop") record.aborted = true
          record.settled = true
          notify()
        })
        notify()

        if (!isCompletion) return sendJson(res, 404, { error: { message: `fake OpenAI: no route ${req.method} ${path}`, type: "invalid_request_error", param: null, code: null } })
        if (!authorized) return sendJson(res, 401, { error: { message: "fake OpenAI: missing bearer key", type: "invalid_request_error", param: null, code: "invalid_api_key" } })
        if (reply === undefined || reply.kind === "hang") return
        const answer = () => {
          switch (reply.kind) {
            case "completion":
              return sendJson(res, 200, completionBody(reply, record))
            case "status":
              return sendJson(res, reply.status, reply.body)
            case "drop":
              return req.socket.destroy()
          }
        }
        pending = answer
        const deliver = () => {
          if (timer) timers.delete(timer)
          if (paused) held.add(answer)
          else answer()
        }
        if (reply.delayMs <= 0) return deliver()
        timer = setTimeout(deliver, reply.delayMs)
        timers.add(timer)
      }

      const server = createServer((req, res) => {
        handle(req, res).catch((error: unknown) => {
          if (!res.headersSent) sendJson(res, 500, { error: { message: `fake OpenAI crashed: ${String(error)}`, type: "server_error", param: null, code: null } })
        })
      })

      const waitUntil = (condition: () => boolean) =>
        Effect.async<void>((resume) => {
          if (condition()) return resume(Effect.void)
          const check = () => {
            if (!condition()) return
            waiters.delete(check)
            resume(Effect.void)
          }
          waiters.add(check)
          return Effect.sync(() => waiters.delete(check))
        })

      const fakeOf = (port: number): FakeOpenAI => ({
        url: `http://127.0.0.1:${port}/v1`,
        enqueue: (...replies) => {
          queue.push(...replies)
        },
        setFallback: (reply) => {
          fallback = reply
        },
        refuseStructuredOutput: (kind) => {
          structuredRefusal = kind
        },
        refuseParameter: (name) => {
          refusedParameters.add(name)
        },
        queued: () => queue.length,
        pause: () => {
          paused = true
        },
        resume: () => {
          paused = false
          const due = [...held]
          held.clear()
          for (const answer of due) answer()
        },
        requests,
        waitUntil,
        awaitRequests: (n) => waitUntil(() => requests.length >= n)
      })

      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(
          Effect.succeed({
            fake: fakeOf(port),
            stop: () => {
              for (const timer of timers) clearTimeout(timer)
              return closeServer(server)
            }
          })
        )
      })
    }),
    ({ stop }) => Effect.promise(stop)
  ).pipe(Effect.map(({ fake }) => fake))
