/**
 * The service as `npm start` runs it, for the benchmark: a tree built first (as `npm start` would build it), started
 * with `npm start` in a process group of its own on its own database, with the shipped settings except the limits
 * (raised, as an operator raises them) and the outside services (the benchmark's model; x402 and card credits on
 * chains and processors that are never called on the measured paths). A credit key is funded through the ledger as a
 * paid checkout would fund it.
 */
import { execFile, spawn, spawnSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { freePort, healthy, send } from "./load.ts"

export const PAY_TO = "0x1111111111111111111111111111111111111111"

/** The limits the benchmark raises (their defaults, 30 analyses an hour, would refuse its load), by their settings. */
export const RAISED_LIMITS: Readonly<Record<string, string>> = Object.fromEntries(
  [
    "GLOBAL_PER_DAY",
    "GLOBAL_PER_HOUR",
    "PAYER_PER_DAY",
    "CONCURRENT",
    "X402_PER_DAY",
    "X402_PER_HOUR",
    "X402_CONCURRENT",
    "FAILURES_PER_DAY",
    "FOODS_PER_MINUTE",
    "CREDITS_PER_KEY_PER_MINUTE",
    "CREDITS_GLOBAL_PER_MINUTE"
  ].map((name) => [`LIMIT_${name}`, "1000000"])
)

/**
 * The settings of a benchmarked server: its database (a data folder, or DATABASE_URL), the model at `modelUrl`, x402
 * on (self-settlement on an unreachable chain: challenges need no chain), card credits in test mode (Stripe unreachable:
 * spending credits needs no processor), the raised limits. Logging is left as shipped (INFO, JSON).
 */
export const shippedEnv = (database: { readonly dataDir: string } | { readonly url: string }, modelUrl: string): Record<string, string> => ({
  HOST: "127.0.0.1",
  ...("url" in database ? { DATABASE_URL: database.url } : { MORSEL_DATA_DIR: database.dataDir }),
  OPENAI_API_KEY: "sk-bench",
  OPENAI_BASE_URL: modelUrl,
  X402_PAY_TO: PAY_TO,
  X402_SETTLER_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  X402_RPC_URL: "http://127.0.0.1:9",
  STRIPE_SECRET_KEY: "sk_test_bench",
  STRIPE_WEBHOOK_SECRET: "whsec_bench",
  STRIPE_API_BASE: "http://127.0.0.1:9",
  ...RAISED_LIMITS
})

/** Builds `tree` when a source is newer than its build, as `npm start` does before it serves; done first so that starts are not builds. */
export const buildIfStale = (tree: string) => {
  const built = spawnSync(process.execPath, [join(tree, "bin/build-if-stale.js")], { cwd: tree, stdio: "inherit" })
  if (built.status !== 0) throw new Error(`the build of ${tree} failed`)
}

const statFields = (pid: string) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
}

/** The processes of a process group. */
const groupPids = (group: number): Array<number> =>
  readdirSync("/proc").flatMap((entry) => {
    if (!/^\d+$/.test(entry)) return []
    try {
      return Number(statFields(entry)[2]) === group ? [Number(entry)] : []
    } catch {
      return []
    }
  })

/** CPU time (user + system, ms) of every process of a group: the server with npm and bin/morsel.js's first process. */
export const groupCpuMs = (group: number): number =>
  groupPids(group).reduce((total, pid) => {
    try {
      const fields = statFields(String(pid))
      return total + (Number(fields[11]) + Number(fields[12])) * 10
    } catch {
      return total
    }
  }, 0)

/** The server of an `npm start` group: the Node process bin/morsel.js started again with the serving options. */
const serverPid = (group: number): number | undefined =>
  groupPids(group).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes("MORSEL_RESTARTED=1")
    } catch {
      return false
    }
  })

export interface Shipped {
  readonly port: number
  /** The server process (memory); `group` is npm start's process group (CPU). */
  readonly pid: number
  readonly group: number
  readonly readyMs: number
  readonly stop: () => Promise<void>
}

/**
 * `npm start` (or another of the package's scripts, `sandbox`) in `tree` until GET /health answers 200 and a first
 * food search is answered (the food index built); `enter` is given npm's process first (a container to run in).
 */
export const startShipped = async (tree: string, env: Readonly<Record<string, string>>, script = "start", enter?: (pid: number) => void): Promise<Shipped> => {
  const port = await freePort()
  const started = performance.now()
  const child = spawn("npm", ["run", script, "--silent"], { cwd: tree, detached: true, stdio: "ignore", env: { ...process.env, ...env, PORT: String(port) } })
  const group = child.pid ?? 0
  enter?.(group)
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.on("exit", resolve))
    process.kill(-group, "SIGTERM")
    await exited
  }
  try {
    while (!(await healthy(port))) {
      if (child.exitCode !== null) throw new Error(`npm start in ${tree} exited with ${child.exitCode}`)
      if (performance.now() - started > 300_000) throw new Error("npm start: no healthy /health within 300 s")
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const readyMs = performance.now() - started
    const first = await send(port, { method: "GET", path: "/v1/foods?q=rice&limit=1" }, undefined, 300_000)
    if (first.status !== 200) throw new Error(`the first search answered ${first.status}`)
    const pid = serverPid(group)
    if (pid === undefined) throw new Error("no server process in npm start's group")
    return { port, pid, group, readyMs, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

/** A new credit key with `packs` packs granted through the ledger of the database `env` names (its server stopped). */
export const fundKey = (env: Readonly<Record<string, string>>, packs: number) =>
  new Promise<string>((resolve, reject) => {
    const script = new URL("./fund.ts", import.meta.url).pathname
    execFile(process.execPath, ["--import", "tsx", script, String(packs)], { env: { ...process.env, ...env, LOG_LEVEL: "warning" } }, (error, stdout) => {
      const key = /^KEY (\S+) /m.exec(stdout)?.[1]
      if (error || key === undefined) reject(error ?? new Error(`funding printed ${stdout}`))
      else resolve(key)
    })
  })

/**
 * A server of `tree` ready to measure: a first start makes its database (migrations, the shipped foods), a key is
 * funded while it is stopped, and it starts again, as a deployed server restarts on a database that exists.
 */
export const shippedServer = async (tree: string, env: Readonly<Record<string, string>>, packs = 4) => {
  await (await startShipped(tree, env)).stop()
  const key = await fundKey(env, packs)
  return { server: await startShipped(tree, env), key: `Bearer ${key}` }
}
