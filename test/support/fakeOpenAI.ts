/** A small OpenAI-compatible Chat Completions server on 127.0.0.1 for tests: scripted replies in, recorded requests out. */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http"
import { Effect, type Scope } from "effect"
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
    }
  | { readonly kind: "status"; readonly status: number; readonly body: unknown; readonly delayMs: number }
  /** Never answers; the request ends only when the client aborts (or the server stops). */
  | { readonly kind: "hang" }
  /** Destroys the socket without an answer: the client sees a connection error. */
  | { readonly kind: "drop"; readonly delayMs: number }

interface DelayOption {
  readonly delayMs?: number
}

export const Reply = {
  /** A normal completion whose message content is `JSON.stringify(answer)`. */
  answer: (answer: unknown, options?: DelayOption): FakeReply => Reply.content(JSON.stringify(answer), options),
  /** A completion with this exact message content (e.g. text that is not JSON). */
  content: (
    content: string | null,
    options?: DelayOption & { readonly finishReason?: "stop" | "length" | "content_filter" }
  ): FakeReply => ({
    kind: "completion",
    content,
    refusal: null,
    finishReason: options?.finishReason ?? "stop",
    delayMs: options?.delayMs ?? 0
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

const completionBody = (reply: Extract<FakeReply, { kind: "completion" }>, model: string | undefined) => ({
  id: `chatcmpl-fake-${++completionCounter}`,
  object: "chat.completion",
  created: Math.floor(Date.now() / 1000),
  model: model ?? "fake-model",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: reply.content, refusal: reply.refusal, annotations: [] },
      logprobs: null,
      finish_reason: reply.finishReason
    }
  ],
  usage: { prompt_tokens: 800, completion_tokens: 120, total_tokens: 920 }
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
        const reply = isCompletion && authorized ? (queue.shift() ?? fallback) : undefined
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
              return sendJson(res, 200, completionBody(reply, record.model))
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
