// `npm start` stopped by its process id: the server it started never outlives it, whether npm is asked to stop
// (SIGTERM) or killed (SIGKILL, which leaves npm's shell and morsel's own waiting process behind it alive).
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort, root } from "../support/process.ts"

/** Whether something accepts connections on the port. */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: "127.0.0.1", port })
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

const until = async (what: () => boolean | Promise<boolean>, ms: number) => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await what()) return true
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return what()
}

describe("npm start stopped by its process id", () => {
  const started: Array<ChildProcess> = []
  beforeAll(async () => {
    // Built only when a source is newer than the build (as `npm start` itself does first).
    await promisify(execFile)(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root })
  }, 600_000)
  afterAll(() => {
    // Whatever a failing test left: npm's whole process group.
    for (const npm of started) {
      try {
        if (npm.pid !== undefined) process.kill(-npm.pid, "SIGKILL")
      } catch {
        // gone
      }
    }
  })

  for (const signal of ["SIGTERM", "SIGKILL"] as const) {
    it(`${signal}: the server stops with it, its port closes and its temporary folders are removed`, async () => {
      const port = await freePort()
      const tmp = mkdtempSync(join(tmpdir(), "morsel-npm-start-"))
      try {
        let output = ""
        const npm = spawn("npm", ["start"], {
          cwd: root,
          env: { PATH: process.env["PATH"] ?? "", HOME: process.env["HOME"] ?? "/root", TMPDIR: tmp, PORT: String(port), MORSEL_DATA_DIR: "memory://" },
          detached: true,
          stdio: ["ignore", "pipe", "pipe"]
        })
        started.push(npm)
        npm.stdout?.on("data", (chunk) => (output += chunk))
        npm.stderr?.on("data", (chunk) => (output += chunk))
        expect(await until(() => output.includes('"morsel started"'), 180_000), output).toBe(true)
        expect(await listening(port)).toBe(true)

        npm.kill(signal)
        expect(await until(async () => !(await listening(port)), 60_000), `still listening after npm got ${signal}:\n${output}`).toBe(true)
        expect(await listening(port)).toBe(false)
        // The embedded database's socket and scratch folders go with the server.
        expect(await until(() => readdirSync(tmp).length === 0, 30_000), readdirSync(tmp).join(", ")).toBe(true)
      } finally {
        rmSync(tmp, { recursive: true, force: true })
      }
    }, 300_000)
  }
})
