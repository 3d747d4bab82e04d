/** The built `morsel` command run as a separate process, as a user runs it: start-up, restarts and crashes. */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"
import { SERVE_ENV, SERVE_NODE_OPTIONS } from "../../bin/tuning.js"

export const root = join(import.meta.dirname, "../..")

/** A port nobody listens on right now. */
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
  /** Everything it printed so far. */
  readonly output: () => string
  /** Stops it the polite way (SIGTERM) and waits for it to exit. */
  readonly stop: () => Promise<void>
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
  })

const signal = (child: ChildProcess, name: NodeJS.Signals) => {
  const done = exited(child)
  child.kill(name)
  return done
}

/** Kills the server as a crash would (SIGKILL: no clean-up at all) and waits for it to be gone. */
export const crash = (served: Served) => signal(served.child, "SIGKILL")

/**
 * Starts `morsel serve …args` (the built CLI) with only the given settings, on `port` or a free one, and waits
 * until `/health` answers 200.
 */
export const serveProcess = async (
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
  port?: number
): Promise<Served> => {
  const listenOn = port ?? (await freePort())
  let output = ""
  // Started as tuned as `morsel serve` makes itself, so the process a test signals is the server itself.
  const child = spawn(process.execPath, [...SERVE_NODE_OPTIONS, join(root, "bin/morsel.js"), "serve", ...args], {
    cwd: root,
    env: { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp", PORT: String(listenOn), ...SERVE_ENV, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout?.on("data", (chunk) => (output += chunk))
  child.stderr?.on("data", (chunk) => (output += chunk))
  const stop = () => signal(child, "SIGTERM")
  const url = `http://127.0.0.1:${listenOn}`
  // Generous: a loaded machine can take a minute or two to start the service.
  for (let i = 0; i < 1_200; i++) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`server exited with ${child.exitCode ?? child.signalCode}: ${output}`)
    }
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

/** What a server prints after its first answers (its banner) comes a moment later: wait for `text`, 30 s at most. */
export const waitForOutput = async (output: () => string, text: string) => {
  for (let i = 0; i < 300 && !output().includes(text); i++) await new Promise((resolve) => setTimeout(resolve, 100))
  return output()
}
