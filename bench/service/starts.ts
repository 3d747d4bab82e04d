/**
 * `--starts`: the starts a user makes, measured from outside — `npm start` on a new embedded folder and again on it
 * (or on a new PostgreSQL database), each left idle 15 s after its first search is answered, with its memory from
 * /proc; and, on the embedded pass, `npm run sandbox` serving three concurrent photos paid with credits from its own
 * checkout, in a memory cgroup limited to 512 MiB where the machine gives one.
 */
import { randomBytes, randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { container } from "./container.ts"
import { peakRssMiB, send } from "./load.ts"
import { type Mappings, mappings } from "./memory.ts"
import { dropDatabase, freshDatabase } from "./postgres.ts"
import { analyzeCall, photos } from "./roles.ts"
import { shippedEnv, startShipped } from "./shipped.ts"

const IDLE_SECONDS = 15
const CONTAINER_MIB = 512

const idle = async (tree: string, env: Readonly<Record<string, string>>, script = "start", enter?: (pid: number) => void) => {
  const server = await startShipped(tree, env, script, enter)
  await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000))
  return { server, memory: mappings(server.pid) }
}

export const startsAndIdle = async (tree: string, modelUrl: string, databaseUrl: string | undefined) => {
  const results: Array<{ start: string; readyMs: number } & Mappings> = []
  const dataDir = mkdtempSync(join(tmpdir(), "morsel-bench-starts-"))
  const db = databaseUrl === undefined ? undefined : await freshDatabase(databaseUrl, `morsel_bench_starts_${process.pid}`)
  const env = shippedEnv(db === undefined ? { dataDir } : { url: db.url }, modelUrl)
  let sandbox: { readonly peak: number; readonly container?: { kind: string; peak: number; refusals: number } } | undefined
  try {
    for (const start of ["first start", "restart"]) {
      const { server, memory } = await idle(tree, env)
      await server.stop()
      results.push({ start: `${db === undefined ? "embedded" : "PostgreSQL"}, ${start}`, readyMs: server.readyMs, ...memory })
    }
    if (db === undefined) {
      const box = container(CONTAINER_MIB)
      try {
        const { server } = await idle(tree, { HOST: "127.0.0.1", LIMIT_CONCURRENT: "8" }, "sandbox", box?.enter)
        try {
          const key = `Bearer morsel_test_${randomBytes(32).toString("hex")}`
          const checkout = await send(server.port, { method: "POST", path: "/v1/credits/checkout", headers: { authorization: key }, body: Buffer.from(JSON.stringify({ order_id: randomUUID() })) })
          const session = String((JSON.parse(checkout.body.toString("utf8")) as { session_id?: string }).session_id)
          const paid = await send(server.port, { method: "POST", path: `/sandbox/checkout/${session}/pay` })
          if (paid.status !== 200) throw new Error(`the sandbox's checkout answered ${checkout.status}, then ${paid.status}`)
          const { large } = await photos()
          const analysed = await Promise.all([0, 1, 2].map((i) => send(server.port, analyzeCall(large, `bench-sandbox-photo-${i}`, "en", key))))
          if (analysed.some((reply) => reply.status !== 200)) throw new Error(`a sandbox analysis failed: ${analysed.map((r) => r.status)}`)
          sandbox = { peak: peakRssMiB(server.pid), ...(box ? { container: { kind: box.kind, peak: box.peakMiB(), refusals: box.refusals() } } : {}) }
        } finally {
          await server.stop()
        }
      } finally {
        box?.remove()
      }
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
    if (db !== undefined && databaseUrl !== undefined) await dropDatabase(databaseUrl, db.name)
  }
  for (const r of results) {
    console.log(`${r.start}: /health after ${(r.readyMs / 1000).toFixed(1)} s; ${IDLE_SECONDS} s idle: RSS ${r.rss.toFixed(0)} MiB (peak ${r.peak.toFixed(0)})`)
  }
  if (sandbox) console.log(`sandbox serving three photos: peak ${sandbox.peak.toFixed(0)} MiB${sandbox.container ? `; ${sandbox.container.kind} of ${CONTAINER_MIB} MiB peak ${sandbox.container.peak.toFixed(0)} MiB, ${sandbox.container.refusals} refused` : ""}`)
  return { results, sandbox }
}
