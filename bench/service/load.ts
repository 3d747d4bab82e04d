/** Load on 127.0.0.1 and what it costs the server: keep-alive request loops, process CPU and peak memory from /proc. */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { Agent, request } from "node:http"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"

export interface Call {
  readonly method: "GET" | "POST"
  readonly path: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: Buffer
}

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string | Array<string> | undefined>>
  readonly body: Buffer
}

export const send = (port: number, call: Call, agent?: Agent, timeoutMs = 180_000): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: call.method,
        path: call.path,
        ...(agent ? { agent } : {}),
        headers: {
          ...(call.body ? { "content-type": "application/json", "content-length": String(call.body.length) } : {}),
          ...call.headers
        }
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }))
        res.on("error", reject)
      }
    )
    req.on("error", reject)
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer to ${call.method} ${call.path} on port ${port} within ${timeoutMs} ms`)))
    req.end(call.body)
  })

/** Whether a server on 127.0.0.1:`port` answers GET /health with 200 within a second (false while it is not listening). */
export const healthy = (port: number): Promise<boolean> =>
  send(port, { method: "GET", path: "/health" }, undefined, 1000).then(
    (reply) => reply.status === 200,
    () => false
  )

/** CPU time (user + system) of a process and its peak resident memory, from /proc. */
export const cpuMs = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  // utime and stime are fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) * 10
}

export const peakRssMiB = (pid: number): number => {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return match ? Number(match[1]) / 1024 : Number.NaN
}

/**
 * Starts a new peak-memory measurement: the high-water mark falls back to the current resident size (Linux
 * `clear_refs` 5), so what a process needed to start (the embedded database's first initdb) is not counted.
 */
export const resetPeakRss = (pid: number): void => writeFileSync(`/proc/${pid}/clear_refs`, "5")

export interface LoadResult {
  readonly requests: number
  readonly perSecond: number
  /** Median and 95th percentile latency of the measured requests, in ms. */
  readonly p50: number
  readonly p95: number
  /** The load generator's own CPU (this process) while it sent them, as a share of one core. */
  readonly generatorCpu: number
  /** Server CPU per request, in ms (the process, plus any extra processes counted by `extraCpu`). */
  readonly cpuMsPerRequest: number
  readonly statuses: Readonly<Record<number, number>>
}

/**
 * `connections` keep-alive loops sending `call` for `seconds` (bounded by `maxRequests`), after a short warm-up.
 * The server's CPU is read around the measured part only.
 */
export const load = async (
  port: number,
  pid: number,
  call: Call,
  options: {
    readonly connections: number
    readonly seconds: number
    readonly maxRequests: number
    /** The server's CPU in ms (default: the process `pid`'s). */
    readonly serverCpu?: () => number
    readonly extraCpu?: () => Promise<number>
    /** Further servers of the same service, each connection sending to one of them in turn with `port`. */
    readonly ports?: ReadonlyArray<number>
  }
): Promise<LoadResult> => {
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections })
  const latencies: Array<number> = []
  const run = async (until: number, budget: { left: number }, statuses: Record<number, number>) => {
    const loop = async (_: unknown, connection: number) => {
      const all = [port, ...(options.ports ?? [])]
      const to = all[connection % all.length]!
      while (performance.now() < until && budget.left > 0) {
        budget.left--
        const sent = performance.now()
        const reply = await send(to, call, agent)
        latencies.push(performance.now() - sent)
        statuses[reply.status] = (statuses[reply.status] ?? 0) + 1
      }
    }
    await Promise.all(Array.from({ length: options.connections }, loop))
    return options.maxRequests - budget.left
  }
  await run(performance.now() + 300, { left: options.maxRequests }, {})
  latencies.length = 0
  const statuses: Record<number, number> = {}
  const serverCpu = options.serverCpu ?? (() => cpuMs(pid))
  const cpuBefore = serverCpu() + ((await options.extraCpu?.()) ?? 0)
  const generatorBefore = process.cpuUsage()
  const started = performance.now()
  const requests = await run(started + options.seconds * 1000, { left: options.maxRequests }, statuses)
  const elapsedMs = performance.now() - started
  const generator = process.cpuUsage(generatorBefore)
  const cpuAfter = serverCpu() + ((await options.extraCpu?.()) ?? 0)
  agent.destroy()
  latencies.sort((a, b) => a - b)
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN
  return {
    requests,
    perSecond: requests / (elapsedMs / 1000),
    p50: at(0.5),
    p95: at(0.95),
    generatorCpu: (generator.user + generator.system) / 1000 / elapsedMs,
    cpuMsPerRequest: (cpuAfter - cpuBefore) / requests,
    statuses
  }
}

/** Latencies in ms of `count` calls made one after another (c = 1), each built fresh by `make`. */
export const sequential = async (port: number, count: number, make: (i: number) => Call) => {
  const times: Array<number> = []
  for (let i = 0; i < count; i++) {
    // The request is made before the clock starts: encoding a 2 MB photo is the client's time, not the server's.
    const call = make(i)
    const started = performance.now()
    const reply = await send(port, call)
    if (reply.status !== 200) throw new Error(`expected 200, got ${reply.status}: ${reply.body.toString("utf8").slice(0, 300)}`)
    times.push(performance.now() - started)
  }
  return times
}

export const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2
}

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
    server.on("error", reject)
  })

export interface Child {
  readonly pid: number
  readonly port: number
  readonly process: ChildProcess
  readonly stop: (signal?: NodeJS.Signals) => Promise<void>
  /** Sends a message over the IPC channel and resolves with the role's next message. */
  readonly ask: <A>(message: string, timeout?: number) => Promise<A>
}

const serviceScript = fileURLToPath(new URL("../service.ts", import.meta.url))

/**
 * Starts one role of bench/service.ts in its own Node process (TypeScript through tsx), or a plain JavaScript
 * script (`.mjs`) by Node alone, and waits for READY.
 */
export const startRole = async (
  role: string,
  env: Readonly<Record<string, string>> = {},
  options: { readonly timeoutMs?: number; readonly script?: string; readonly nodeArgs?: ReadonlyArray<string> } = {}
): Promise<Child> => {
  const timeoutMs = options.timeoutMs ?? 120_000
  const port = await freePort()
  const script = options.script ?? serviceScript
  const loader = script.endsWith(".mjs") ? [] : ["--import", "tsx"]
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...loader, script, role], {
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "inherit", "ipc"]
  })
  const ready = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${role} did not start within ${timeoutMs} ms`)), timeoutMs)
    let buffered = ""
    child.stdout?.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8")
      const match = /READY (\d+)/.exec(buffered)
      if (match) {
        clearTimeout(timer)
        resolve(Number(match[1]))
      }
    })
    child.on("exit", (code) => reject(new Error(`${role} exited with ${code} before it was ready`)))
  })
  const stop = (signal: NodeJS.Signals = "SIGTERM") =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve()
      child.on("exit", () => resolve())
      child.kill(signal)
      setTimeout(() => child.kill("SIGKILL"), 5000).unref()
    })
  const ask = <A>(message: string, timeout = 30_000) =>
    new Promise<A>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${role} did not answer "${message}"`)), timeout)
      child.once("message", (answer) => {
        clearTimeout(timer)
        resolve(answer as A)
      })
      child.send(message)
    })
  return { pid: child.pid ?? 0, port: ready, process: child, stop, ask }
}
