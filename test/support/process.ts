/** The built `morsel` command run as a separate process, as a user runs it. */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"

export const root = join(import.meta.dirname, "../..")

export const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0))
    })
  })

export interface Served {
  readonly url: string
  readonly child: ChildProcess
  readonly output: () => string
  readonly stop: () => Promise<void>
}

/** Starts `morsel serve …args` (the built CLI) on a free port and waits until `/health` answers. */
export const serveProcess = async (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Served> => {
  const port = await freePort()
  let output = ""
  const child = spawn(process.execPath, [join(root, "bin/morsel.js"), "serve", ...args], {
    cwd: root,
    env: { PATH: process.env["PATH"] ?? "", PORT: String(port), ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout?.on("data", (chunk) => (output += chunk))
  child.stderr?.on("data", (chunk) => (output += chunk))
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve()
      child.once("exit", () => resolve())
      child.kill("SIGTERM")
    })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 900; i++) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}: ${output}`)
    try {
      if ((await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) })).ok) return { url, child, output: () => output, stop }
    } catch {
      // not answering yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  await stop()
  throw new Error(`server did not answer /health: ${output}`)
}
