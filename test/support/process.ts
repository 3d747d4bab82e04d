/** The built CLI's `morsel serve` as a child process on 127.0.0.1, for tests of start-up, restarts and crashes. */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"

const root = join(import.meta.dirname, "../..")

/** A port nobody listens on right now. */
export const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0))
    })
  })

export interface ServerProcess {
  readonly url: string
  readonly child: ChildProcess
  /** Everything it printed so far. */
  readonly output: () => string
}

const waitForHealth = async (server: ServerProcess) => {
  // Generous: a loaded machine can take a minute to start the service.
  for (let i = 0; i < 1_200; i++) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new Error(`server exited with ${server.child.exitCode ?? server.child.signalCode}: ${server.output()}`)
    }
    try {
      const answer = await fetch(`${server.url}/health`, { signal: AbortSignal.timeout(1000) })
      if (answer.ok) return
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`server did not answer /health: ${server.output()}`)
}

/** Runs the built CLI like `npm start` does, with only the given settings, and waits until /health answers 200. */
export const serve = async (env: Record<string, string>, port?: number): Promise<ServerProcess> => {
  const listenOn = port ?? (await freePort())
  let output = ""
  const child = spawn(process.execPath, [join(root, "bin/morsel.js"), "serve"], {
    cwd: root,
    env: { PATH: process.env["PATH"] ?? "", PORT: String(listenOn), ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout?.on("data", (chunk) => (output += chunk))
  child.stderr?.on("data", (chunk) => (output += chunk))
  const server = { url: `http://127.0.0.1:${listenOn}`, child, output: () => output }
  await waitForHealth(server)
  return server
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
  })

/** Stops the server the polite way (SIGTERM) and waits for it to exit. */
export const stop = (server: ServerProcess) => {
  const done = exited(server.child)
  server.child.kill("SIGTERM")
  return done
}

/** Kills the server as a crash would (SIGKILL: no clean-up at all) and waits for it to be gone. */
export const crash = (server: ServerProcess) => {
  const done = exited(server.child)
  server.child.kill("SIGKILL")
  return done
}
