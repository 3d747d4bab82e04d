/**
 * `--growth`: how an analysis grows with the photo's size (0.2, 1 and 2 MB) and with the analyses in flight (1, 3, 8),
 * on this tree's server beside the floor doing the same — median latency, throughput and the peak RSS of each step,
 * the high-water mark reset before it — and, on PostgreSQL, the 402's throughput from one instance to two on the
 * same database (connections split between them, both instances' CPU counted).
 */
import { type Call, type Child, load, median, peakRssMiB, resetPeakRss, send } from "./load.ts"
import { analyzeCall, photoOf } from "./roles.ts"
import { groupCpuMs, type Shipped, shippedEnv, startShipped } from "./shipped.ts"

interface Subject {
  readonly label: string
  readonly server: Shipped
  readonly key: string
  readonly database?: string
}

const SIZES = [
  { label: "0.2 MB", width: 800, height: 600, maxBytes: 200_000 },
  { label: "1 MB", width: 1448, height: 1086, maxBytes: 1_000_000 },
  { label: "2 MB", width: 2048, height: 1536, maxBytes: 1_950_000 }
]
const IN_FLIGHT = [1, 3, 8]
const WAVES = 3

/** `waves` waves of `c` analyses sent at once: each analysis's latency, the whole time, and the peak RSS. */
const waves = async (port: number, pid: number, c: number, make: (i: number) => Call) => {
  resetPeakRss(pid)
  const latencies: Array<number> = []
  const started = performance.now()
  for (let wave = 0; wave < WAVES; wave++) {
    await Promise.all(
      Array.from({ length: c }, async (_, i) => {
        const call = make(wave * c + i)
        const sent = performance.now()
        const reply = await send(port, call)
        if (reply.status !== 200) throw new Error(`growth: ${reply.status} ${reply.body.toString("utf8").slice(0, 200)}`)
        latencies.push(performance.now() - sent)
      })
    )
  }
  return { ms: median(latencies), perSecond: (WAVES * c) / ((performance.now() - started) / 1000), peak: peakRssMiB(pid) }
}

export const growth = async (context: {
  readonly subjects: ReadonlyArray<Subject>
  readonly floor: Child
  readonly databaseUrl: string | undefined
  readonly modelUrl: string
  readonly trees: ReadonlyArray<{ readonly label: string; readonly tree: string }>
}) => {
  const subject = context.subjects[0]!
  const run = `growth-${Date.now().toString(36)}`
  const steps: Array<{ size: string; bytes: number; inFlight: number; service: { ms: number; perSecond: number; peak: number }; floor: { ms: number; perSecond: number; peak: number } }> = []
  console.log(`\ngrowth: ${WAVES} waves of 1, 3 and 8 analyses sent at once per photo size; median ms, analyses/s, peak RSS MiB (service | floor)`)
  for (const size of SIZES) {
    const photo = await photoOf(size.width, size.height, size.maxBytes)
    for (const c of IN_FLIGHT) {
      const service = await waves(subject.server.port, subject.server.pid, c, (i) => analyzeCall(photo, `${run}-${size.label.replace(/\W/g, "")}-${c}-${i}`, "en", subject.key))
      const floor = await waves(context.floor.port, context.floor.pid, c, (i) => ({ ...analyzeCall(photo, `${run}-floor-${i}`), path: "/v1/analyze?decode" }))
      steps.push({ size: size.label, bytes: photo.length, inFlight: c, service, floor })
      console.log(
        `${size.label} (${(photo.length / 1e6).toFixed(2)} MB, ${size.width}×${size.height}), ${c} in flight: ${service.ms.toFixed(1)} ms, ${service.perSecond.toFixed(1)}/s, ${service.peak.toFixed(0)} MiB | ` +
          `${floor.ms.toFixed(1)} ms, ${floor.perSecond.toFixed(1)}/s, ${floor.peak.toFixed(0)} MiB`
      )
    }
  }
  const instances = context.databaseUrl === undefined ? undefined : await twoInstances(subject, context)
  return { steps, instances }
}

/** The 402 at 8 connections on one instance, then split over two instances of this tree on the same database, alternating. */
const twoInstances = async (
  subject: Subject,
  context: { readonly databaseUrl: string | undefined; readonly modelUrl: string; readonly trees: ReadonlyArray<{ readonly tree: string }> }
) => {
  if (subject.database === undefined || context.databaseUrl === undefined) return undefined
  const url = new URL(context.databaseUrl)
  url.pathname = `/${subject.database}`
  const second = await startShipped(context.trees[0]!.tree, shippedEnv({ url: url.toString() }, context.modelUrl))
  try {
    // A challenge answers a valid request only: a small photo.
    const plate = await photoOf(64, 64, 20_000)
    const unfunded: Call = { ...analyzeCall(plate, "growth-unpaid-0001"), headers: { "idempotency-key": "growth-unpaid-0001" } }
    const options = { connections: 8, seconds: 1.5, maxRequests: 50_000 }
    const one: Array<number> = []
    const two: Array<number> = []
    const cpuOne: Array<number> = []
    const cpuTwo: Array<number> = []
    for (let round = 0; round < 3; round++) {
      const a = await load(subject.server.port, subject.server.pid, unfunded, { ...options, serverCpu: () => groupCpuMs(subject.server.group) })
      one.push(a.perSecond)
      cpuOne.push(a.cpuMsPerRequest)
      const b = await load(subject.server.port, subject.server.pid, unfunded, {
        ...options,
        ports: [second.port],
        serverCpu: () => groupCpuMs(subject.server.group) + groupCpuMs(second.group)
      })
      two.push(b.perSecond)
      cpuTwo.push(b.cpuMsPerRequest)
    }
    const result = { one: median(one), two: median(two), cpuOne: median(cpuOne), cpuTwo: median(cpuTwo) }
    console.log(
      `402 on one instance ${result.one.toFixed(0)} req/s (${result.cpuOne.toFixed(3)} ms CPU), on two behind one PostgreSQL ${result.two.toFixed(0)} req/s ` +
        `(${result.cpuTwo.toFixed(3)} ms CPU): ×${(result.two / result.one).toFixed(2)}`
    )
    return result
  } finally {
    await second.stop()
  }
}
