// `morsel model check` run from the sources against the fake OpenAI-compatible server: a working model, one whose
// server refuses strict structured output (it falls back), broken ones (the verdict says why), and bad settings.
import { execFile } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type FakeOpenAI, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { chickenRice } from "../support/meals.ts"

const root = join(import.meta.dirname, "../..")

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** `morsel model check …args` with only PATH and the given settings in its environment (no database anywhere). */
const check = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<Run>((resume) => {
    execFile(
      process.execPath,
      ["--import", "tsx", join(root, "src/cli.ts"), "model", "check", ...args],
      { cwd: root, env: { PATH: process.env["PATH"] ?? "", LOG_LEVEL: "warning", ...env }, timeout: 90_000 },
      (error, stdout, stderr) => resume(Effect.succeed({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }))
    )
  })

const settingsFor = (fake: FakeOpenAI, extra: Record<string, string> = {}) => ({
  OPENAI_API_KEY: "sk-fake-check",
  OPENAI_BASE_URL: fake.url,
  VISION_MODEL: "gpt-5-mini",
  ...extra
})

const PRICES = { MODEL_PRICE_INPUT_PER_MTOK: "0.25", MODEL_PRICE_CACHED_INPUT_PER_MTOK: "0.025", MODEL_PRICE_OUTPUT_PER_MTOK: "2" }

const body = (fake: FakeOpenAI, i: number) => fake.requests[i]?.body as Record<string, unknown>

describe("morsel model check", () => {
  it.scopedLive("against a working model: strict output accepted, latency, tokens, cost, the meal and 'works' (exit 0)", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.enqueue(Reply.answer(chickenRice))
      const run = yield* check([], settingsFor(fake, PRICES))
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toMatch(/structured output\s+accepted \(strict json_schema\)/)
      expect(run.stdout).toMatch(/latency\s+\d+\.\d\d s/)
      expect(run.stdout).toMatch(/tokens\s+[\d,]+ prompt \(0 cached\), [\d,]+ completion \(0 reasoning\)/)
      expect(run.stdout).toMatch(/cost\s+0\.000\d+ USD, of the 0\.01 USD an analysis earns \(margin 0\.00\d+ USD\)/)
      expect(run.stdout).toContain("Grilled chicken")
      expect(run.stdout).toContain("verdict: works — analyses will be served as configured")
      // One call with the shipped photo, the defaults as sent: low effort, auto detail, 4,000 output tokens.
      expect(fake.requests).toHaveLength(1)
      expect(body(fake, 0)).toMatchObject({ reasoning_effort: "low", max_completion_tokens: 4000, response_format: { type: "json_schema" } })
      expect(JSON.stringify(body(fake, 0)["messages"])).toContain('"detail":"auto"')
    }), 120_000)

  it.scopedLive("sends the reasoning effort, image detail and output cap as set; no prices: tokens and no cost; --json", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.enqueue(Reply.answer(chickenRice, { usage: { prompt_tokens: 1500, completion_tokens: 900, completion_tokens_details: { reasoning_tokens: 640 } } }))
      const run = yield* check(
        ["--json", "--photo", join(root, "test/fixtures/lunch.jpg")],
        settingsFor(fake, { VISION_REASONING_EFFORT: "minimal", VISION_IMAGE_DETAIL: "high", VISION_MAX_OUTPUT_TOKENS: "1500" })
      )
      expect(run.code, run.stderr).toBe(0)
      expect(body(fake, 0)).toMatchObject({ reasoning_effort: "minimal", max_completion_tokens: 1500 })
      expect(JSON.stringify(body(fake, 0)["messages"])).toContain('"detail":"high"')
      const answer = JSON.parse(run.stdout) as Record<string, unknown>
      // The cached count was not reported, so it is absent, not zero; no prices, so no cost.
      expect(answer["tokens"]).toEqual({ prompt: 1500, completion: 900, reasoning: 640 })
      expect(answer).not.toHaveProperty("cost_usd")
      expect(answer["structured_output"]).toBe("json_schema")
      expect(answer["verdict"]).toMatchObject({ works: true, fallback: null })
    }), 120_000)

  it.scopedLive("against a server that refuses json_schema (llama.cpp's 500): falls back to JSON mode and says so (exit 0)", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.refuseStructuredOutput("llamacpp")
      fake.enqueue(Reply.answer(chickenRice))
      const run = yield* check([], settingsFor(fake))
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toMatch(/structured output\s+refused; answered in JSON mode \(json_object\)/)
      expect(run.stdout).toContain("verdict: works with a fallback — the server refused strict structured output, so analyses ask in JSON mode")
      expect(fake.requests.map((r) => (r.responseFormat as { type?: string } | undefined)?.type)).toEqual(["json_schema", "json_object"])
      // The schema travels in the instruction instead.
      expect(fake.requests[1]?.userText).toContain('"additionalProperties":false')
    }), 120_000)

  it.scopedLive("against a model that refuses reasoning_effort: works with a fallback naming it", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.refuseParameter("reasoning_effort")
      fake.enqueue(Reply.answer(chickenRice))
      const run = yield* check([], settingsFor(fake))
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toContain("verdict: works with a fallback — the model refused reasoning_effort, so it is not sent")
      expect(body(fake, 1)).not.toHaveProperty("reasoning_effort")
    }), 120_000)

  it.scopedLive("against a broken model: the verdict says why and the exit code is 1", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.enqueue(Reply.content("Here is your meal: chicken and rice."))
      const unreadable = yield* check([], settingsFor(fake))
      expect(unreadable.code).toBe(1)
      expect(unreadable.stdout).toMatch(/verdict: does not work — the model answer broke the answer rules/)
      // The tokens of the unusable answer are shown all the same: they are paid for.
      expect(unreadable.stdout).toMatch(/tokens\s+[\d,]+ prompt/)

      const refusing = yield* startFakeOpenAI()
      refusing.enqueue(Reply.status(404, { message: "The model `gpt-5-mini` does not exist", code: "model_not_found" }))
      const missing = yield* check(["--json"], settingsFor(refusing))
      expect(missing.code).toBe(1)
      expect(JSON.parse(missing.stdout)).toMatchObject({
        verdict: {
          works: false,
          why: "the vision model provider answered HTTP 404 (model_not_found): check VISION_MODEL against the models this server offers"
        },
        tokens: null
      })
    }), 120_000)

  it.effect("without a key or with a bad setting: one line naming it, exit 1", () =>
    Effect.gen(function* () {
      // Side by side: each is a process starting the command from its sources.
      const [noKey, bad, half] = yield* Effect.all(
        [
          check([], {}),
          check([], { OPENAI_API_KEY: "sk-x", VISION_REASONING_EFFORT: "extreme" }),
          check([], { OPENAI_API_KEY: "sk-x", MODEL_PRICE_INPUT_PER_MTOK: "0.25" })
        ],
        { concurrency: "unbounded" }
      )
      expect(noKey.code).toBe(1)
      expect(noKey.stdout).toContain("verdict: does not work — OPENAI_API_KEY is unset")
      expect(bad.code).toBe(1)
      expect(bad.stderr).toBe('morsel: bad setting VISION_REASONING_EFFORT: must be one of none, minimal, low, medium, high, xhigh or default (not sent), not "extreme"\n')
      expect(half.code).toBe(1)
      expect(half.stderr).toBe("morsel: bad setting MODEL_PRICE_OUTPUT_PER_MTOK: needed with the other price: set MODEL_PRICE_INPUT_PER_MTOK and MODEL_PRICE_OUTPUT_PER_MTOK together\n")
    }), 120_000)

  it.scopedLive("--json prints one JSON document on stdout, the retries' log lines on stderr; --verbose names each cause apart", () =>
    Effect.gen(function* () {
      const refusedPort = yield* Effect.promise(freePort)
      const plain = yield* startFakeOpenAI()
      const keyRefused = yield* startFakeOpenAI()
      keyRefused.enqueue(Reply.status(401, { message: "Incorrect API key provided: sk-fake…", code: "invalid_api_key" }))
      const stuck = yield* startFakeOpenAI()
      stuck.enqueue(Reply.hang())
      const json = (run: Run) => {
        // The whole of stdout is one document: no log line before or after it.
        expect(() => JSON.parse(run.stdout), `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`).not.toThrow()
        return (JSON.parse(run.stdout) as { verdict: { works: boolean; why: string; detail?: string } }).verdict
      }
      const verbose = ["--json", "--verbose"]
      const [unknownHost, refused, tls, unauthorized, timedOut, quiet] = yield* Effect.all(
        [
          check(verbose, { OPENAI_API_KEY: "sk-x", OPENAI_BASE_URL: "http://no-such-host.invalid/v1", LOG_LEVEL: "info" }),
          check(verbose, { OPENAI_API_KEY: "sk-x", OPENAI_BASE_URL: `http://127.0.0.1:${refusedPort}/v1`, LOG_LEVEL: "info" }),
          check(verbose, { OPENAI_API_KEY: "sk-x", OPENAI_BASE_URL: plain.url.replace(/^http:/, "https:"), LOG_LEVEL: "info" }),
          check(verbose, settingsFor(keyRefused, { LOG_LEVEL: "info" })),
          check(verbose, settingsFor(stuck, { ANALYSIS_TIMEOUT_MS: "1500", LOG_LEVEL: "info" })),
          check(["--json"], { OPENAI_API_KEY: "sk-x", OPENAI_BASE_URL: `http://127.0.0.1:${refusedPort}/v1`, LOG_LEVEL: "info" })
        ],
        // Two at a time: each is a process starting the command from its sources.
        { concurrency: 2 }
      )
      for (const run of [unknownHost, refused, tls, unauthorized, timedOut]) expect(run.code, run.stderr).toBe(1)
      // The retries were logged, and not on stdout.
      expect(refused.stderr).toContain("vision model call failed; retrying a few times")
      expect(json(unknownHost).why).toBe("the host no-such-host.invalid is unknown (no address found for it): check the name in OPENAI_BASE_URL")
      expect(json(unknownHost).detail).toMatch(/could not reach the vision model provider; (ENOTFOUND|EAI_AGAIN)/)
      expect(json(refused).why).toBe(`127.0.0.1:${refusedPort} refused the connection (nothing listens there): start the model server, or correct the port in OPENAI_BASE_URL`)
      expect(json(refused).detail).toContain("ECONNREFUSED")
      expect(json(tls).why).toMatch(/^the TLS handshake with 127\.0\.0\.1:\d+ failed \(ERR_SSL_WRONG_VERSION_NUMBER\): a server without TLS is reached with http:\/\//)
      expect(json(unauthorized).why).toMatch(/^127\.0\.0\.1:\d+ refused the key \(HTTP 401\): check OPENAI_API_KEY/)
      expect(json(timedOut).why).toMatch(/^127\.0\.0\.1:\d+ took the request but did not answer within 1500 ms/)
      // Five causes, five different sentences; the key's echo never appears.
      expect(new Set([unknownHost, refused, tls, unauthorized, timedOut].map((run) => json(run).why)).size).toBe(5)
      expect(unauthorized.stdout + unauthorized.stderr).not.toContain("Incorrect API key")
      // Without --verbose the cause is named all the same; the system's own words are not added.
      expect(json(quiet).why).toBe(json(refused).why)
      expect(json(quiet)).not.toHaveProperty("detail")
    }), 400_000)

  it.scopedLive("as a table, --verbose adds the cause's own words under the verdict", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(freePort)
      const run = yield* check(["--verbose"], { OPENAI_API_KEY: "sk-x", OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1` })
      expect(run.code).toBe(1)
      expect(run.stdout).toContain(`verdict: does not work — 127.0.0.1:${port} refused the connection`)
      expect(run.stdout).toMatch(/^cause: could not reach the vision model provider; ECONNREFUSED: connect ECONNREFUSED 127\.0\.0\.1:\d+$/m)
      expect(run.stdout).not.toContain("retrying")
    }), 120_000)
})

/** A port nobody listens on right now. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0))
    })
  })
