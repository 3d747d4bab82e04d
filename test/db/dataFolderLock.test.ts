// One holder per data folder under any scheduling: a stale lock (its server crashed) is taken over by exactly one of
// the servers that start on the folder at once, and servers that start and stop on the same folders never hold one
// together, while other processes keep every core busy.
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LOCK_FILE } from "../../src/db/dataFolderLock.ts"
import { root } from "../support/process.ts"

const run = promisify(execFile)

/** A process id that no process holds: one that ran and ended. */
const goneProcessId = async () => {
  const { stdout } = await run(process.execPath, ["-e", "process.stdout.write(String(process.pid))"])
  return Number(stdout)
}

/** The lines a process prints, one at a time. */
const linesOf = (child: ChildProcess) => {
  const lines: Array<string> = []
  let text = ""
  let waiting: (() => void) | undefined
  child.stdout?.on("data", (chunk: Buffer) => {
    text += chunk
    for (let end = text.indexOf("\n"); end >= 0; end = text.indexOf("\n")) {
      lines.push(text.slice(0, end))
      text = text.slice(end + 1)
    }
    waiting?.()
  })
  const exited = new Promise<never>((_, reject) => child.once("exit", (code) => reject(new Error(`exited ${code} after printing ${JSON.stringify(text)}`))))
  exited.catch(() => undefined)
  return async (): Promise<string> => {
    while (lines.length === 0) await Promise.race([new Promise<void>((resolve) => (waiting = resolve)), exited])
    return lines.shift()!
  }
}

/**
 * Runs `count` processes of test/support/lockRace.ts; once all are loaded (a loaded machine takes seconds), tells
 * them to start together half a second later, and gives what each printed. Their input closes at the end, which
 * ends those that hold their locks until then.
 */
const race = async <A>(count: number, ...args: Array<string>): Promise<Array<A>> => {
  const racers = Array.from({ length: count }, () =>
    spawn(process.execPath, ["--import", "tsx", join(root, "test/support/lockRace.ts"), ...args], { cwd: root, stdio: ["pipe", "pipe", "inherit"] })
  )
  const next = racers.map(linesOf)
  try {
    await Promise.all(next.map((line) => line()))
    const at = Date.now() + 500
    for (const racer of racers) racer.stdin?.write(`${at}\n`)
    return (await Promise.all(next.map((line) => line()))).map((line) => JSON.parse(line) as A)
  } finally {
    await Promise.all(
      racers.map((racer) => {
        const exited = new Promise((resolve) => racer.once("exit", resolve))
        racer.stdin?.end()
        return racer.exitCode === null ? exited : undefined
      })
    )
  }
}

const ROUNDS = 60
const STARTERS = 6

describe("the data folder's lock, with every core kept busy", () => {
  const parent = mkdtempSync(join(tmpdir(), "morsel-lock-"))
  // Processes spinning on every core: the starters are preempted at any point of their steps.
  const load: Array<ChildProcess> = []
  beforeAll(() => {
    for (let core = 0; core < cpus().length; core++) {
      load.push(spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }))
    }
  })
  afterAll(() => {
    for (const child of load) child.kill("SIGKILL")
    rmSync(parent, { recursive: true, force: true })
  })

  it(`left by a crashed server, is taken by one of ${STARTERS} servers starting together, the others refused (${ROUNDS} folders)`, async () => {
    const gone = await goneProcessId()
    for (let round = 0; round < ROUNDS; round++) {
      mkdirSync(join(parent, "crashed", String(round)), { recursive: true })
      writeFileSync(join(parent, "crashed", String(round), LOCK_FILE), `${gone}\n`)
    }
    // Every starter tries each folder at the same millisecond, 100 ms apart, and holds what it took until all are done.
    const starters = await race<Array<string>>(STARTERS, "together", join(parent, "crashed"), String(ROUNDS), "100")
    for (let round = 0; round < ROUNDS; round++) {
      const outcomes = starters.map((outcomes) => outcomes[round]!)
      expect(outcomes.filter((outcome) => outcome === "held"), `folder ${round}: ${outcomes.join(" / ")}`).toHaveLength(1)
      for (const refusal of outcomes.filter((outcome) => outcome !== "held")) {
        expect(refusal).toMatch(/^refused the embedded database in .* is in use by another morsel process \(pid \d+\)/)
      }
    }
  }, 120_000)

  it(`is never held by two of ${STARTERS} servers that start and stop on 3 folders for 8 s, at random moments`, async () => {
    for (let folder = 0; folder < 3; folder++) mkdirSync(join(parent, "churn", String(folder)), { recursive: true })
    const tallies = await race<{ held: number; refused: number; overlaps: Array<string> }>(STARTERS, "churn", join(parent, "churn"), "3", "8000")
    expect(tallies.flatMap((tally) => tally.overlaps)).toEqual([])
    // Both outcomes happened many times: the folders changed hands under contention.
    expect(tallies.reduce((sum, tally) => sum + tally.held, 0)).toBeGreaterThan(20)
    expect(tallies.reduce((sum, tally) => sum + tally.refused, 0)).toBeGreaterThan(20)
  }, 120_000)
})
