/**
 * `npx tsx bench/ab.ts <other tree> <scenario…>`: the benchmark's morsel from this tree and from another checkout
 * (e.g. `git worktree add /tmp/base main`), loaded in alternating rounds with the same calls, so that both see the
 * same machine load: CPU per request and throughput of each, and their ratio. Scenarios: replay, challenge, health,
 * and analyze (one ~2 MB photo at a time: median latency and CPU per analysis).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { SERVE_ENV, SERVE_NODE_OPTIONS } from "../bin/tuning.js"
import { type Call, type Child, cpuMs, type LoadResult, load, median, send, sequential, startRole } from "./service/load.ts"
import { analyzeCall, morselEnv, photos } from "./service/roles.ts"

const [other, ...names] = process.argv.slice(2)
if (other === undefined) throw new Error("usage: bench/ab.ts <other tree> <scenario…>")
const ROUNDS = Number(process.env["ROUNDS"] ?? "5")
const SECONDS = Number(process.env["SECONDS"] ?? "1.5")

const { large, small } = await photos()
const run = `ab-${Date.now().toString(36)}`
const replay = analyzeCall(small, `${run}-replay`)
const calls: Record<string, Call> = {
  replay,
  challenge: { ...replay, headers: { "idempotency-key": `${run}-unpaid` } },
  health: { method: "GET", path: "/health" }
}

const dirs = [mkdtempSync(join(tmpdir(), "morsel-ab-")), mkdtempSync(join(tmpdir(), "morsel-ab-"))]
const servers: Array<Child> = []
try {
  // Both with the Node options and environment `morsel serve` runs a server with.
  const options = { nodeArgs: SERVE_NODE_OPTIONS }
  servers.push(await startRole("morsel", { ...SERVE_ENV, ...morselEnv(dirs[0]!) }, options))
  servers.push(await startRole("morsel", { ...SERVE_ENV, ...morselEnv(dirs[1]!) }, { ...options, script: join(resolve(other), "bench/service.ts") }))
  for (const server of servers) await send(server.port, replay)
  for (const name of names.length > 0 ? names : [...Object.keys(calls), "analyze"]) {
    if (name === "analyze") {
      const latencies: Array<Array<number>> = [[], []]
      const cpu: Array<Array<number>> = [[], []]
      for (let round = 0; round < ROUNDS; round++) {
        for (const [i, server] of servers.entries()) {
          const before = cpuMs(server.pid)
          latencies[i]!.push(...(await sequential(server.port, 3, (n) => analyzeCall(large, `${run}-big-${round}-${n}`))))
          cpu[i]!.push((cpuMs(server.pid) - before) / 3)
        }
      }
      const [here, there] = [0, 1].map((i) => ({ ms: median(latencies[i]!), cpu: median(cpu[i]!) }))
      console.log(
        `analyze    this tree ${here!.ms.toFixed(1)} ms, ${here!.cpu.toFixed(1)} ms CPU; other ${there!.ms.toFixed(1)} ms, ${there!.cpu.toFixed(1)} ms CPU`
      )
      continue
    }
    const call = calls[name]
    if (call === undefined) throw new Error(`unknown scenario ${name}`)
    const results: Array<Array<LoadResult>> = [[], []]
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, server] of servers.entries()) {
        results[i]!.push(await load(server.port, server.pid, call, { connections: 8, seconds: SECONDS, maxRequests: 1_000_000 }))
      }
    }
    const [here, there] = results.map((r) => ({ cpu: median(r.map((x) => x.cpuMsPerRequest)), perSecond: median(r.map((x) => x.perSecond)) }))
    console.log(
      `${name.padEnd(10)} this tree ${here!.cpu.toFixed(3)} ms CPU/req ${here!.perSecond.toFixed(0)} req/s; other ${there!.cpu.toFixed(3)} ms CPU/req ${there!.perSecond.toFixed(0)} req/s; CPU ratio ${(here!.cpu / there!.cpu).toFixed(2)} ${JSON.stringify(results[0]![0]!.statuses)}`
    )
  }
} finally {
  for (const server of servers) await server.stop()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
}
