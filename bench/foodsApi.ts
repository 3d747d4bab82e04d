/**
 * The free food paths through HTTP on the server as `npm start` runs it (built tree, embedded database with its real
 * ledger and limits, the shipped SR28 copy on a new folder): latency per call of GET /v1/foods and POST
 * /v1/nutrition (1 and 20 items, by text and by id, and a meal of ten foods in words), side by side with GET /health in alternating rounds, and the
 * start-up cost of the food index. LIMIT_FOODS_PER_MINUTE is raised to 1,000,000, the one setting changed.
 */
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { Agent } from "node:http"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { buildIndex } from "../src/foods/core/matcher.ts"
import { shippedFoods } from "../src/foods/core/shipped.ts"
import { readSet } from "../test/foods/quality/plainFirst.ts"
import type { Benchmark } from "./run.ts"
import { type Call, freePort, healthy, send } from "./service/load.ts"

const root = dirname(dirname(fileURLToPath(import.meta.url)))

/** Texts as people and the model write them: grocery names, dishes' components, USDA's order, a typo, a miss. */
const QUERIES = [
  "tofu",
  "rice",
  "chicken breast",
  "rice, white, cooked",
  "apples",
  "whole milk",
  "cheddar cheese",
  "potatoes, roasted",
  "grilled salmon",
  "scrambled eggs",
  "greek yogurt",
  "broccoli",
  "peanut butter",
  "olive oil",
  "bread",
  "banana",
  "ground beef",
  "black beans",
  "brocolli",
  "chicken shawarma"
]

/** Foods of a meal by id (SR28 NDB numbers) with a household portion where they have one. */
const BY_ID: ReadonlyArray<Record<string, unknown>> = [
  { fdc_id: "20045", grams: 150 },
  { fdc_id: "01123", portion: { amount: 2, unit: "large" } },
  { fdc_id: "05064", grams: 120 },
  { fdc_id: "11090", grams: 80 },
  { fdc_id: "09040", portion: { amount: 1, unit: "medium" } },
  { fdc_id: "01077", portion: { amount: 1, unit: "cup" } },
  { fdc_id: "16427", grams: 100 },
  { fdc_id: "04053", grams: 10 },
  { fdc_id: "18069", grams: 30 },
  { fdc_id: "09003", grams: 180 }
]

/** Meals in words of ten foods each, as people write them: counts, household words, grams, containers, no amounts. */
const MEALS = [
  "2 eggs, a slice of toast with butter, a latte, an apple, a glass of milk, 150 g rice, 1 tbsp olive oil, 3 oz chicken breast, a can of coke and two slices of pizza",
  "For lunch I had a turkey sandwich, a banana, a handful of almonds, 1 cup greek yogurt, some blueberries, a bagel with cream cheese, 2 tbsp peanut butter, a cup of coffee and an orange",
  "half a cup of oatmeal\n1½ cups milk\n2 large eggs\n3 strips of bacon\n1 medium banana\na glass of orange juice\ncoffee with sugar\n2 pancakes\nmaple syrup"
]

const byQuery = (i: number) => ({ query: QUERIES[i % QUERIES.length]!, grams: 100 + (i % 7) * 10 })
const byId = (i: number) => BY_ID[i % BY_ID.length]!

const nutrition = (items: ReadonlyArray<Record<string, unknown>>): Call => ({
  method: "POST",
  path: "/v1/nutrition",
  body: Buffer.from(JSON.stringify({ items }))
})

/** The calls measured, each made fresh per request (i counts the calls of its kind), GET /health first. */
const KINDS: ReadonlyArray<{ readonly label: string; readonly call: (i: number) => Call }> = [
  { label: "GET /health", call: () => ({ method: "GET", path: "/health" }) },
  { label: `GET /v1/foods?q= (${QUERIES.length} texts in turn)`, call: (i) => ({ method: "GET", path: `/v1/foods?q=${encodeURIComponent(QUERIES[i % QUERIES.length]!)}` }) },
  { label: "POST /v1/nutrition, 1 item by text", call: (i) => nutrition([byQuery(i)]) },
  { label: "POST /v1/nutrition, 1 item by fdc_id", call: (i) => nutrition([byId(i)]) },
  { label: "POST /v1/nutrition, 20 items by text", call: (i) => nutrition(Array.from({ length: 20 }, (_, k) => byQuery(i + k))) },
  { label: "POST /v1/nutrition, 20 items by fdc_id", call: (i) => nutrition(Array.from({ length: 20 }, (_, k) => byId(i + k))) },
  { label: "POST /v1/nutrition, 20 items, 10 + 10", call: (i) => nutrition(Array.from({ length: 20 }, (_, k) => (k % 2 === 0 ? byQuery(i + k) : byId(i + k)))) },
  { label: "POST /v1/nutrition, a 10-food meal in words", call: (i) => ({ method: "POST", path: "/v1/nutrition", body: Buffer.from(JSON.stringify({ text: MEALS[i % MEALS.length] })) }) }
]

const ROUNDS = Number(process.env["ROUNDS"] ?? "20")
const PER_ROUND = Number(process.env["PER_ROUND"] ?? "50")

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN

/** CPU time (user + system, in ms) of every process of a process group, from /proc: `npm start`'s server with npm and its shells. */
const groupCpuMs = (group: number): number => {
  let total = 0
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      // Fields 5 (process group), 14 and 15 (utime, stime in ticks of 10 ms) of stat.
      if (Number(fields[2]) === group) total += (Number(fields[11]) + Number(fields[12])) * 10
    } catch {
      // a process that ended meanwhile
    }
  }
  return total
}

/** `npm start` on a new data folder until GET /health answers 200; `stop` ends its process group. */
const startServer = async (dataDir: string) => {
  const port = await freePort()
  const started = performance.now()
  const child = spawn("npm", ["start", "--silent"], {
    cwd: root,
    detached: true,
    stdio: "ignore",
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", MORSEL_DATA_DIR: dataDir, LOG_LEVEL: "warning", LIMIT_FOODS_PER_MINUTE: "1000000" }
  })
  const stop = async () => {
    if (child.exitCode !== null || child.pid === undefined) return
    const exited = new Promise((resolve) => child.on("exit", resolve))
    process.kill(-child.pid, "SIGTERM")
    await exited
  }
  let readyMs = 0
  try {
    while (!(await healthy(port))) {
      if (child.exitCode !== null) throw new Error(`npm start exited with ${child.exitCode}`)
      if (performance.now() - started > 300_000) throw new Error("npm start: no healthy /health within 300 s")
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    readyMs = performance.now() - started
    // The food index is built once the server listens: the first food call waits for it.
    const first = await send(port, { method: "GET", path: "/v1/foods?q=rice&limit=1" }, undefined, 300_000)
    if (first.status !== 200) throw new Error(`the first search answered ${first.status}`)
  } catch (error) {
    await stop()
    throw error
  }
  return { port, group: child.pid ?? 0, readyMs, foodsMs: performance.now() - started, stop }
}

/** Latencies in ms of `count` calls of a kind, one after another on one kept-alive connection; every answer must be 200. */
const timed = async (port: number, agent: Agent, kind: (typeof KINDS)[number], from: number, count: number) => {
  const times: Array<number> = []
  for (let i = from; i < from + count; i++) {
    const call = kind.call(i)
    const started = performance.now()
    const reply = await send(port, call, agent)
    times.push(performance.now() - started)
    if (reply.status !== 200) throw new Error(`${kind.label}: ${reply.status} ${reply.body.toString("utf8").slice(0, 300)}`)
  }
  return times
}

export const foodsApiBenchmark: Benchmark = {
  name: "foods-api",
  run: async () => {
    // `npm start` compiles a stale tree before it serves: done first, so that the start measured is a built tree's.
    const built = spawnSync(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root, stdio: "inherit" })
    if (built.status !== 0) throw new Error("the build failed")

    const records = shippedFoods()
    const builds: Array<number> = []
    for (let i = 0; i < 3; i++) {
      const t = performance.now()
      buildIndex(records)
      builds.push(performance.now() - t)
    }
    builds.sort((a, b) => a - b)
    console.log(`food index of the shipped SR28 copy (${records.length} foods), built in this process: ${builds.map((ms) => ms.toFixed(0)).join(", ")} ms`)

    console.log("server: `npm start` on a built tree, embedded database, the shipped SR28 copy; LIMIT_FOODS_PER_MINUTE=1000000, the one setting changed")
    const dataDir = mkdtempSync(join(tmpdir(), "morsel-bench-foods-"))
    try {
      const first = await startServer(dataDir)
      await first.stop()
      const server = await startServer(dataDir)
      const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`
      console.log(`npm start to GET /health 200: ${s(first.readyMs)} on a new folder, ${s(server.readyMs)} on restart`)
      console.log(`npm start to the first search answered (the food index built): ${s(first.foodsMs)} on a new folder, ${s(server.foodsMs)} on restart`)
      const agent = new Agent({ keepAlive: true, maxSockets: 1 })
      try {
        // Every text is read once before the clock starts: the figures are of a warm server, as one serving people is.
        for (const kind of KINDS) await timed(server.port, agent, kind, 0, QUERIES.length * 2)
        const times = KINDS.map(() => [] as Array<number>)
        const cpu = KINDS.map(() => 0)
        for (let round = 0; round < ROUNDS; round++) {
          for (const [k, kind] of KINDS.entries()) {
            const before = groupCpuMs(server.group)
            times[k]!.push(...(await timed(server.port, agent, kind, round * PER_ROUND, PER_ROUND)))
            cpu[k]! += groupCpuMs(server.group) - before
          }
        }
        // Texts the server has never read: each is prepared and ranked afresh (the search-quality sets' 155 names).
        const fresh = [...readSet("tune.tsv"), ...readSet("held-out.tsv")].map((n) => n.name)
        const firstSight = { label: "POST /v1/nutrition, 20 texts never seen before", call: (i: number) => nutrition(fresh.slice(i * 20, i * 20 + 20).map((query) => ({ query, grams: 100 }))) }
        const freshCalls = Math.floor(fresh.length / 20)
        const freshBefore = groupCpuMs(server.group)
        const freshTimes = await timed(server.port, agent, firstSight, 0, freshCalls)
        const freshCpu = groupCpuMs(server.group) - freshBefore
        const sorted = times.map((t) => [...t].sort((a, b) => a - b))
        const health = { p50: quantile(sorted[0]!, 0.5), p95: quantile(sorted[0]!, 0.95) }
        const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")
        console.log(`\n${ROUNDS} alternating rounds of ${PER_ROUND} calls per kind, one at a time (c = 1), keep-alive, 127.0.0.1; ms per call (load average ${load})`)
        console.log(`${"call".padEnd(48)} ${"p50".padStart(7)} ${"p95".padStart(7)}   ×/health p50   ×/health p95   server CPU/call`)
        for (const [k, kind] of KINDS.entries()) {
          const p50 = quantile(sorted[k]!, 0.5)
          const p95 = quantile(sorted[k]!, 0.95)
          console.log(
            `${kind.label.padEnd(48)} ${p50.toFixed(2).padStart(7)} ${p95.toFixed(2).padStart(7)}   ${(p50 / health.p50).toFixed(1).padStart(12)}   ${(p95 / health.p95).toFixed(1).padStart(12)}   ${(cpu[k]! / (ROUNDS * PER_ROUND)).toFixed(2).padStart(15)}`
          )
        }
        freshTimes.sort((a, b) => a - b)
        console.log(
          `${firstSight.label.padEnd(48)} median ${quantile(freshTimes, 0.5).toFixed(2)}, slowest ${freshTimes[freshTimes.length - 1]?.toFixed(2)} of ${freshCalls} calls; server CPU/call ${(freshCpu / freshCalls).toFixed(2)}`
        )
      } finally {
        agent.destroy()
        await server.stop()
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
}
