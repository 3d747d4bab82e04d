// Refusals as a person reads them, from the built command: a body too large names how to shrink the photo and, in
// the sandbox, says it is the sandbox like every other answer; a bad setting is one line, its name once, its rule.
import { execFile } from "node:child_process"
import { request } from "node:http"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_BODY_BYTES } from "../../src/domain/bodies.ts"
import { root, type Served, serveProcess } from "../support/process.ts"

interface Answer {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: string
}

/** One POST of `bytes` bytes of JSON-typed body, sent whole before the answer is read (as curl and fetch do). */
const post = (url: string, bytes: number) =>
  new Promise<Answer>((resolve, reject) => {
    const sent = request(url, { method: "POST", headers: { "content-type": "application/json", "content-length": bytes } }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (body += chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }))
    })
    sent.on("error", reject)
    sent.end(Buffer.alloc(bytes, 0x61))
  })

describe("a body too large, in the sandbox", () => {
  let sandbox: Served
  beforeAll(async () => {
    sandbox = await serveProcess(["--sandbox"], { MORSEL_DATA_DIR: "memory://" })
  }, 240_000)
  afterAll(async () => {
    await sandbox?.stop()
  })

  it("413 request_too_large says how to shrink the photo and carries Morsel-Sandbox: true, on every route", async () => {
    for (const path of ["/v1/analyze", "/v1/nutrition", "/v1/credits/checkout"]) {
      const answer = await post(`${sandbox.url}${path}`, MAX_BODY_BYTES + 100_000)
      expect(answer.status, path).toBe(413)
      expect(answer.headers["morsel-sandbox"], path).toBe("true")
      expect(JSON.parse(answer.body), path).toEqual({
        _tag: "PayloadTooLarge",
        error: {
          code: "request_too_large",
          message: `request body exceeds ${MAX_BODY_BYTES} bytes: send the photo upright, at most 2048 px a side, as a JPEG of at most 2,000,000 bytes (morsel analyze and morsel/client prepare one so)`
        }
      })
    }
  }, 120_000)
})

/** `morsel serve` with only these settings: it must refuse them before anything starts. */
const serveWith = (env: Record<string, string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [join(root, "bin/morsel.js"), "serve"],
      { cwd: root, env: { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp", ...env }, timeout: 90_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
    )
  })

describe("a bad setting", () => {
  it("is one line on stderr: the setting's name once and the rule it breaks, no parser's words", async () => {
    const cases: ReadonlyArray<readonly [Record<string, string>, string]> = [
      [{ X402_PAY_TO: "0x1234" }, "morsel: bad setting X402_PAY_TO: must be a 0x-prefixed 20-byte hex address"],
      [{ PORT: "eighty" }, 'morsel: bad setting PORT: must be a whole number, not "eighty"'],
      [{ LOG_FORMAT: "xml" }, 'morsel: bad setting LOG_FORMAT: must be one of json, pretty, not "xml"'],
      [{ OPENAI_BASE_URL: "ftp://models.example" }, "morsel: bad setting OPENAI_BASE_URL: must be an http(s) URL"],
      [{ X402_SETTLER_PRIVATE_KEY: "0x12" }, "morsel: bad setting X402_SETTLER_PRIVATE_KEY: must be a 0x-prefixed 32-byte hex private key"],
      [{ STRIPE_SECRET_KEY: "sk_test_abc" }, "morsel: bad setting STRIPE_WEBHOOK_SECRET: required when STRIPE_SECRET_KEY is set"],
      [{ TRUSTED_PROXIES: "proxy.example" }, 'morsel: bad setting TRUSTED_PROXIES: must list IP addresses or CIDR ranges such as 10.0.0.0/8 or fd00::/8, not "proxy.example"']
    ]
    const runs = await Promise.all(cases.map(([env]) => serveWith({ ...env, MORSEL_DATA_DIR: "memory://" })))
    runs.forEach((run, i) => {
      const [env, line] = cases[i]!
      expect(run.code, JSON.stringify(env)).toBe(1)
      expect(run.stderr, JSON.stringify(env)).toBe(`${line}\n`)
      expect(run.stdout, JSON.stringify(env)).toBe("")
    })
  }, 120_000)
})
