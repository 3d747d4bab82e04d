// `morsel analyze` against a server it cannot trust: the payment_pending retry it keeps is filed under a request id it
// checked (a UUID, canonical lower case), never where the server's answer points, and never holds the credit key.
import { execFile } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort, root } from "../support/process.ts"

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const morsel = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  new Promise<Run>((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", join(root, "src/cli.ts"), ...args],
      { cwd: root, env: { PATH: process.env["PATH"] ?? "", ...env }, timeout: 300_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
    )
  })

/** Every file under `folder`, with its path. */
const filesUnder = (folder: string): Array<string> =>
  readdirSync(folder, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(folder, entry.name)) : [join(folder, entry.name)]
  )

const KEY = `mk_test_${randomBytes(24).toString("hex")}`

let folder = ""
let photo = ""
let server: Server
let url = ""
/** What the server answers to the next analyses, in order; afterwards 200. */
const answers: Array<{ status: number; body: unknown }> = []
const seen: Array<IncomingHttpHeaders> = []

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "morsel-pending-"))
  photo = join(folder, "soup.jpg")
  await sharp(randomBytes(320 * 240 * 3), { raw: { width: 320, height: 240, channels: 3 } })
    .jpeg()
    .toFile(photo)
  server = createServer(async (req, res) => {
    for await (const _ of req) {
      // the body is not needed
    }
    seen.push(req.headers)
    const next = answers.shift() ?? { status: 200, body: { request_id: randomUUID(), dish_name: "soup", estimate: true, model: "fake" } }
    res.writeHead(next.status, { "content-type": "application/json", ...(next.status === 503 ? { "retry-after": "60" } : {}) })
    res.end(JSON.stringify(next.body))
  })
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  url = `http://127.0.0.1:${port}`
}, 60_000)

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve))
  rmSync(folder, { recursive: true, force: true })
})

const pending = (requestId: unknown) => ({
  status: 503,
  body: { error: { code: "payment_pending", message: "the payment is being confirmed", request_id: requestId } }
})

describe("morsel analyze keeping a payment_pending retry", () => {
  it("refuses a request_id of ../../escaped in one line: nothing is written outside its state folder, nor anything at all", async () => {
    const home = join(folder, "hostile")
    const state = join(home, "a", "state")
    mkdirSync(state, { recursive: true })
    for (const hostile of ["../../escaped", "8d2fb40e-3d48-4c46-adbc-accb130c07d1/../../../escaped", ""]) {
      answers.push(pending(hostile))
      const run = await morsel(["analyze", photo, "--base-url", url, "--key", KEY], { MORSEL_STATE_DIR: state })
      expect(run.code).toBe(1)
      expect(run.stderr.trimEnd().split("\n"), run.stderr).toHaveLength(1)
      expect(run.stderr).toMatch(/^morsel: HTTP 503 payment_pending: .*no well-formed request_id/)
      expect(run.stderr).not.toContain("--resume")
    }
    // No file anywhere under the home nor in the temporary folder's root: nothing was kept.
    expect(filesUnder(home)).toEqual([])
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith("escaped"))).toEqual([])
  }, 360_000)

  it("files a UUID in any case under its lower-case form, without the credit key; --resume takes the key again", async () => {
    const state = join(folder, "state")
    const requestId = randomUUID()
    answers.push(pending(requestId.toUpperCase()))
    const run = await morsel(["analyze", photo, "--base-url", url, "--key", KEY], { MORSEL_STATE_DIR: state })
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(new RegExp(`morsel analyze --resume ${requestId} --key <key>\\n$`))
    const files = filesUnder(state)
    expect(files).toEqual([join(state, "pending", `${requestId}.json`)])
    expect(statSync(files[0]!).mode & 0o777).toBe(0o600)
    expect(readFileSync(files[0]!, "utf8")).not.toContain(KEY)
    const sent = seen.at(-1)!
    expect(sent.authorization).toBe(`Bearer ${KEY}`)

    // Without the key, the retry is not sent and stays kept.
    const before = seen.length
    const keyless = await morsel(["analyze", "--resume", requestId], { MORSEL_STATE_DIR: state })
    expect(keyless.code).toBe(1)
    expect(keyless.stderr).toBe(`morsel: analysis ${requestId} is paid with credits: give its key again with --key or MORSEL_API_KEY\n`)
    expect(seen.length).toBe(before)
    expect(filesUnder(state)).toHaveLength(1)

    // With it (here from the environment), the identical retry goes out with the key and the same Idempotency-Key.
    const resumed = await morsel(["analyze", "--resume", requestId, "--json"], { MORSEL_STATE_DIR: state, MORSEL_API_KEY: KEY })
    expect(resumed.code, resumed.stderr).toBe(0)
    const retried = seen.at(-1)!
    expect(retried.authorization).toBe(`Bearer ${KEY}`)
    expect(retried["idempotency-key"]).toBe(sent["idempotency-key"])
    expect(filesUnder(state)).toEqual([])
  }, 360_000)
})
