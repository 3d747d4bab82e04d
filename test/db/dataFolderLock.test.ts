// A stale lock (its server crashed) is taken over by exactly one of the servers that start on the folder at once.
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"
import { LOCK_FILE } from "../../src/db/dataFolderLock.ts"
import { root } from "../support/process.ts"

const run = promisify(execFile)

/** A process id that no process holds: one that ran and ended. */
const goneProcessId = async () => {
  const { stdout } = await run(process.execPath, ["-e", "process.stdout.write(String(process.pid))"])
  return Number(stdout)
}

const ROUNDS = 60
const STARTERS = 6

describe("the data folder's lock", () => {
  const parent = mkdtempSync(join(tmpdir(), "morsel-lock-"))
  afterAll(() => rmSync(parent, { recursive: true, force: true }))

  it(`left by a crashed server, is taken by one of ${STARTERS} servers starting together, the others refused (${ROUNDS} folders)`, async () => {
    const gone = await goneProcessId()
    for (let round = 0; round < ROUNDS; round++) {
      mkdirSync(join(parent, String(round)))
      writeFileSync(join(parent, String(round), LOCK_FILE), `${gone}\n`)
    }
    // Every starter tries each folder at the same millisecond, 100 ms apart, and holds what it took until all are done.
    const at = Date.now() + 3_000
    const until = at + ROUNDS * 100 + 3_000
    const starters = await Promise.all(
      Array.from({ length: STARTERS }, () =>
        run(process.execPath, ["--import", "tsx", join(root, "test/support/lockRace.ts"), parent, String(ROUNDS), String(at), "100", String(until)], {
          cwd: root
        }).then(({ stdout }) => JSON.parse(stdout) as Array<string>)
      )
    )
    for (let round = 0; round < ROUNDS; round++) {
      const outcomes = starters.map((outcomes) => outcomes[round]!)
      expect(outcomes.filter((outcome) => outcome === "held"), `folder ${round}: ${outcomes.join(" / ")}`).toHaveLength(1)
      for (const refusal of outcomes.filter((outcome) => outcome !== "held")) {
        expect(refusal).toMatch(/^refused the embedded database in .* is in use by another morsel process \(pid \d+\)/)
      }
    }
  }, 120_000)
})
