// The README's quick start, run as written against a fresh sandbox: its first two commands in order, each compared
// with the output the README shows under it. A command or an output that drifts from the README fails here.
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, root } from "../support/process.ts"

interface Block {
  readonly lang: string
  readonly text: string
}

/** The fenced blocks of the README's quick-start section, in order. */
const quickStartBlocks = (): Array<Block> => {
  const readme = readFileSync(join(root, "README.md"), "utf8")
  const start = readme.indexOf("\n## Quick start")
  const end = readme.indexOf("\n## ", start + 1)
  const section = readme.slice(start, end)
  return Array.from(section.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm), (match) => ({ lang: match[1] ?? "", text: match[2] ?? "" }))
}

/** Each shell command of the README with the output block that follows it (if any). */
const commands = (blocks: ReadonlyArray<Block>) =>
  blocks.flatMap((block, i) =>
    block.lang === "sh" ? [{ command: block.text.trim(), shown: blocks[i + 1]?.lang === "text" ? blocks[i + 1]!.text : "" }] : []
  )

/** Each line the README shows must come, in order, in what the command printed; `…` stands for anything. */
const expectShown = (printed: string, shown: string) => {
  const lines = printed.split("\n").map((line) => line.trimEnd())
  let at = 0
  for (const expected of shown.split("\n").map((line) => line.trimEnd()).filter((line) => line !== "")) {
    const pattern = new RegExp(`^${expected.split("…").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`)
    const found = lines.findIndex((line, i) => i >= at && pattern.test(line))
    expect(found, `the README shows "${expected}", but the command printed:\n${printed}`).toBeGreaterThanOrEqual(0)
    at = found + 1
  }
}

const DEFAULT_PORT = "8787"

/** Every fenced shell block of the README, with the text before it (what it is for). */
const shellBlocks = () => {
  const readme = readFileSync(join(root, "README.md"), "utf8")
  return Array.from(readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm), (match) => ({ text: match[1] ?? "", before: readme.slice(0, match.index) }))
}

describe("the README's quick start", () => {
  let server: ChildProcess | undefined
  let env: Record<string, string> = {}
  let port = ""
  afterAll(async () => {
    // The whole process group: npm, and the sandbox it started; then wait until every process of it is gone (the
    // sandbox removes its database folder from TMPDIR on the way out).
    const group = server?.pid
    if (group === undefined) return
    const alive = () => {
      try {
        process.kill(-group, 0)
        return true
      } catch {
        return false
      }
    }
    if (alive()) process.kill(-group, "SIGTERM")
    for (let waited = 0; alive() && waited < 30_000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100))
  }, 60_000)

  it("runs as written: the sandbox starts, and the photo is analysed and paid as the README shows", async () => {
    const steps = commands(quickStartBlocks())
    expect(steps.length).toBeGreaterThanOrEqual(2)
    const serve = steps[0]!
    const analyze = steps[1]!
    // Installing is the suite's own business (CI has run `npm ci`): the rest of the command runs as written.
    expect(serve.command).toMatch(/^npm ci && /)
    port = String(await freePort())
    // A random port for the test; the README's URLs name the default one.
    env = { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp", HOME: process.env["HOME"] ?? "/root", PORT: port, MORSEL_BASE_URL: `http://127.0.0.1:${port}` }
    const onPort = (text: string) => text.replaceAll(`127.0.0.1:${DEFAULT_PORT}`, `127.0.0.1:${port}`)

    let printed = ""
    server = spawn("bash", ["-c", serve.command.replace(/^npm ci && /, "")], { cwd: root, env, detached: true, stdio: ["ignore", "pipe", "pipe"] })
    server.stdout?.on("data", (chunk) => (printed += chunk))
    server.stderr?.on("data", (chunk) => (printed += chunk))
    const firstShown = onPort(serve.shown.trim().split("\n")[0] ?? "")
    for (let i = 0; i < 1_800 && !printed.includes(firstShown) && server.exitCode === null; i++) await new Promise((resolve) => setTimeout(resolve, 100))
    expectShown(printed, onPort(serve.shown))

    const run = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile("bash", ["-c", `${analyze.command} 2>&1`], { cwd: root, env, timeout: 120_000 }, (error, stdout) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, output: stdout })
      )
    })
    expect(run.code, run.output).toBe(0)
    expectShown(run.output, onPort(analyze.shown))
  }, 300_000)

  it("every shell block parses; the card-credits block runs as written on that sandbox, the reader's Pay press made here", async () => {
    for (const block of shellBlocks()) {
      const parsed = await new Promise<number>((resolve) => execFile("bash", ["-n", "-c", block.text], (error) => resolve(error === null ? 0 : 1)))
      expect(parsed, block.text).toBe(0)
    }
    const cards = shellBlocks().find((block) => block.before.trimEnd().endsWith("**With card credits instead of a wallet** (still the sandbox, nothing charged):"))
    expect(cards).toBeDefined()
    const [beforePay = "", afterPay = ""] = (cards?.text ?? "").replaceAll("127.0.0.1:8787", `127.0.0.1:${port}`).split(/^# open that page and press Pay\n/m)
    expect(afterPay).not.toBe("")
    const bash = (script: string, extra: Record<string, string> = {}) =>
      new Promise<{ code: number; output: string }>((resolve) =>
        execFile("bash", ["-c", `set -eo pipefail\n${script}`], { cwd: root, env: { ...env, ...extra }, timeout: 120_000 }, (error, stdout, stderr) =>
          resolve({ code: error ? Number(error.code ?? 1) : 0, output: `${stdout}${stderr}` })
        )
      )
    const bought = await bash(`${beforePay}\necho "key: $KEY"`)
    expect(bought.code, bought.output).toBe(0)
    const page = /(http:\/\/127\.0\.0\.1:\d+\/sandbox\/checkout\/cs_test_\w+)/.exec(bought.output)?.[1]
    const key = /^key: (morsel_test_[0-9a-f]{64})$/m.exec(bought.output)?.[1]
    expect(page, bought.output).toBeDefined()
    // The reader opens the page and presses Pay.
    expect((await fetch(`${page}/pay`, { method: "POST" })).status).toBe(200)
    const spent = await bash(afterPay, { KEY: key ?? "" })
    expect(spent.code, spent.output).toBe(0)
    expectShown(spent.output, "500 credits (test mode)\n…\ntotal …")
  }, 300_000)
})
