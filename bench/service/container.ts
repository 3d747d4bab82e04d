/**
 * A memory-limited container for a process of the benchmark: a memory cgroup of its own (v2, or v1's memory
 * controller) limited to a size, whose high-water mark counts the process and the page cache it writes, as a
 * container's does. Needs a writable cgroup file system (root on a host or a privileged container); elsewhere none.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const MiB = 1024 * 1024

export interface Container {
  /** Where it is, for the figures: "cgroup v2" or "cgroup v1". */
  readonly kind: string
  /** Moves a process (and the children it starts from then on) into the container. */
  readonly enter: (pid: number) => void
  /** The container's high-water mark in MiB, page cache included. */
  readonly peakMiB: () => number
  /** How often an allocation hit the limit (v1's failcnt, v2's `max` events). */
  readonly refusals: () => number
  /** Removes it; its processes must be gone. */
  readonly remove: () => void
}

const read = (path: string) => readFileSync(path, "utf8").trim()

const v2 = (limitMiB: number): Container | undefined => {
  const root = "/sys/fs/cgroup"
  const control = join(root, "cgroup.subtree_control")
  if (!existsSync(control) || !read(control).split(" ").includes("memory")) return undefined
  const dir = join(root, `morsel-bench-${process.pid}`)
  mkdirSync(dir)
  writeFileSync(join(dir, "memory.max"), String(limitMiB * MiB))
  writeFileSync(join(dir, "memory.swap.max"), "0")
  return {
    kind: "cgroup v2",
    enter: (pid) => writeFileSync(join(dir, "cgroup.procs"), String(pid)),
    peakMiB: () => Number(read(join(dir, "memory.peak"))) / MiB,
    refusals: () => Number(/^max (\d+)$/m.exec(read(join(dir, "memory.events")))?.[1] ?? 0),
    remove: () => rmdirSync(dir)
  }
}

const v1 = (limitMiB: number): Container | undefined => {
  const root = "/sys/fs/cgroup/memory"
  if (!existsSync(join(root, "memory.limit_in_bytes"))) return undefined
  const dir = join(root, `morsel-bench-${process.pid}`)
  mkdirSync(dir)
  writeFileSync(join(dir, "memory.limit_in_bytes"), String(limitMiB * MiB))
  return {
    kind: "cgroup v1",
    enter: (pid) => writeFileSync(join(dir, "cgroup.procs"), String(pid)),
    peakMiB: () => Number(read(join(dir, "memory.max_usage_in_bytes"))) / MiB,
    refusals: () => Number(read(join(dir, "memory.failcnt"))),
    remove: () => rmdirSync(dir)
  }
}

/** A container limited to `limitMiB`, or undefined where this machine gives none. */
export const container = (limitMiB: number): Container | undefined => {
  try {
    return v2(limitMiB) ?? v1(limitMiB)
  } catch {
    return undefined
  }
}
