// One embedded database, one server: a second server on the same MORSEL_DATA_DIR stops before serving, in one
// line naming the folder and the process holding it; a crashed server's lock never blocks the next start.
import { execFile, spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LOCK_FILE } from "../../src/db/dataFolderLock.ts"
import { crash, freePort, root, serveProcess } from "../support/process.ts"

/** Runs `morsel serve` expecting it to stop at once: its exit code and what it printed. */
const refusedStart = async (dataDir: string) => {
  const port = await freePort()
  const child = spawn(process.execPath, [join(root, "bin/morsel.js"), "serve"], {
    cwd: root,
    env: { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp", PORT: String(port), MORSEL_DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout?.on("data", (chunk) => (stdout += chunk))
  child.stderr?.on("data", (chunk) => (stderr += chunk))
  // A server that does not stop by itself is the failure under test; it must not outlive the test.
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  clearTimeout(timer)
  const answered = await fetch(`http://127.0.0.1:${port}/health`).then(
    () => true,
    () => false
  )
  return { code, stdout, stderr, answered }
}

describe("one server per embedded data folder", () => {
  const parent = mkdtempSync(join(tmpdir(), "morsel-folder-"))

  beforeAll(async () => {
    // Built only when a source is newer than the build (as `npm start` does), not once per test file.
    await promisify(execFile)(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root })
  }, 120_000)
  afterAll(() => rmSync(parent, { recursive: true, force: true }))

  it("a second server on the same folder exits 1 with one line naming the folder and the first server's process", async () => {
    const dataDir = join(parent, "shared")
    const first = await serveProcess([], { MORSEL_DATA_DIR: dataDir })
    try {
      const second = await refusedStart(dataDir)
      expect(second.code).toBe(1)
      expect(second.answered).toBe(false)
      expect(second.stdout).toBe("")
      const lines = second.stderr.trim().split("\n")
      expect(lines).toHaveLength(1)
      expect(lines[0]).toContain(`the embedded database in ${dataDir} is in use by another morsel process (pid ${first.child.pid})`)
      expect(lines[0]).toContain("MORSEL_DATA_DIR")
      // The first server is untouched.
      expect((await fetch(`${first.url}/health`)).status).toBe(200)
    } finally {
      await first.stop()
    }
    // A clean stop releases the folder.
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false)
  }, 180_000)

  it("after a crash (SIGKILL, the lock file left behind) the next server starts on the folder", async () => {
    const dataDir = join(parent, "crashed")
    const first = await serveProcess([], { MORSEL_DATA_DIR: dataDir })
    await crash(first)
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(true)
    const next = await serveProcess([], { MORSEL_DATA_DIR: dataDir })
    try {
      expect((await fetch(`${next.url}/health`)).status).toBe(200)
    } finally {
      await next.stop()
    }
  }, 180_000)
})
