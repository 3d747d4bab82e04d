/** Where a process's memory goes, from /proc (any process) and from inside (the benchmark's own morsel role). */
import { readFileSync } from "node:fs"
import { getHeapSpaceStatistics } from "node:v8"

const MiB = 1024 * 1024

/** What /proc shows of a process, in MiB: resident size, its peak, and the resident part of its mappings by kind. */
export interface Mappings {
  readonly rss: number
  readonly peak: number
  /**
   * WebAssembly memories (the embedded database's): read-write pages between two reservations of ≥ 1 GiB, V8's
   * guard regions. A malloc mapping can sit right below the first: it is not counted here.
   */
  readonly wasmMemory: number
  /** Executable anonymous pages: compiled JavaScript and WebAssembly (the embedded database's PostgreSQL). */
  readonly jitCode: number
  /** Mapped files: the node binary, libvips and the other shared libraries. */
  readonly files: number
  /** Everything else anonymous: the V8 heap, array buffers, malloc (libvips' pixels, Node's own). */
  readonly otherAnonymous: number
}

interface Mapping {
  readonly start: number
  readonly end: number
  readonly perms: string
  readonly file: boolean
  rss: number
}

export const mappings = (pid: number | "self"): Mappings => {
  const all: Array<Mapping> = []
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$/.exec(line)
    if (head) {
      all.push({ start: Number.parseInt(head[1]!, 16), end: Number.parseInt(head[2]!, 16), perms: head[3]!, file: head[5]!.startsWith("/"), rss: 0 })
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    const last = all[all.length - 1]
    if (rss && last) last.rss = Number(rss[1]) / 1024
  }
  const reservation = (m: Mapping | undefined) => m?.perms.startsWith("---") === true && m.end - m.start >= 1024 * MiB
  let wasmMemory = 0
  let jitCode = 0
  let files = 0
  let otherAnonymous = 0
  all.forEach((m, i) => {
    if (m.file) files += m.rss
    else if (m.perms.includes("x")) jitCode += m.rss
    else if (m.perms.startsWith("rw") && reservation(all[i + 1]) && all[i + 1]!.start === m.end && reservation(all[i - 1]) && all[i - 1]!.end === m.start) wasmMemory += m.rss
    else otherAnonymous += m.rss
  })
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? Number.NaN) / 1024
  return { rss: kb("VmRSS"), peak: kb("VmHWM"), wasmMemory, jitCode, files, otherAnonymous }
}

/** What the process knows of itself, in MiB; `extra` names further parts measured by the caller (the food index, libvips). */
export interface Breakdown extends Mappings {
  /** V8's heap: what is used (after a full GC when the process runs with --expose-gc), and what is committed. */
  readonly heapUsed: number
  readonly heapCommitted: number
  /** Compiled code and bytecode V8 keeps in its code spaces. */
  readonly codeSpace: number
  /** Memory outside the heap that JavaScript objects hold: Buffers and ArrayBuffers (`arrayBuffers`), plus WebAssembly memories. */
  readonly external: number
  readonly arrayBuffers: number
  readonly extra: Readonly<Record<string, number>>
}

export const breakdown = (extra: Readonly<Record<string, number>> = {}): Breakdown => {
  globalThis.gc?.()
  const usage = process.memoryUsage()
  const codeSpace = getHeapSpaceStatistics()
    .filter((space) => space.space_name.startsWith("code"))
    .reduce((sum, space) => sum + space.space_used_size, 0)
  return {
    ...mappings("self"),
    heapUsed: usage.heapUsed / MiB,
    heapCommitted: usage.heapTotal / MiB,
    codeSpace: codeSpace / MiB,
    external: usage.external / MiB,
    arrayBuffers: usage.arrayBuffers / MiB,
    extra
  }
}

const f = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? "n/a" : n.toFixed(0))

/** One line of a breakdown, in words. */
export const describeMappings = (m: Mappings) =>
  `RSS ${f(m.rss)} MiB (peak ${f(m.peak)}): WebAssembly memory ${f(m.wasmMemory)}, compiled code ${f(m.jitCode)}, mapped files ${f(m.files)}, other anonymous ${f(m.otherAnonymous)}`

export const describeBreakdown = (b: Breakdown) =>
  [
    describeMappings(b),
    `  V8 heap ${f(b.heapUsed)} used of ${f(b.heapCommitted)} committed (code and bytecode spaces ${f(b.codeSpace)}); ` +
      `external ${f(b.external)} (array buffers ${f(b.arrayBuffers)}, the rest WebAssembly memory reserved)` +
      Object.entries(b.extra)
        .map(([name, value]) => `; ${name} ${f(value)}`)
        .join("")
  ].join("\n")
