/**
 * `npm run bench:service`: the service as `npm start` runs it (its database, ledger, limits raised by their settings,
 * food index, Node options) side by side with its baselines, interleaved on one load generator whose own CPU is
 * reported — the 402 challenge against the reference seller (`@x402/express`), replays, GET /health and an analysis
 * against a bare `node:http` floor, the peak memory of three concurrent photos against the floor's — and the free food
 * paths beside GET /health. `--against <tree>` runs another checkout's server in the same rounds; `--growth` measures
 * how an analysis grows with photo size and concurrency, and the 402 from one to two instances on PostgreSQL;
 * `--starts` adds `npm start`'s time and the idle memory of the starts a user makes. Embedded database by default,
 * PostgreSQL with DATABASE_URL (in databases the benchmark makes there and drops); with TEST_DATABASE_URL alone, the
 * embedded database and then PostgreSQL on that server. Prints the figures and writes them as JSON to bench/results/.
 */
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { growth } from "./service/growth.ts"
import { type Call, type Child, type LoadResult, load, median, peakRssMiB, resetPeakRss, send, sequential, startRole } from "./service/load.ts"
import { describeMappings, mappings } from "./service/memory.ts"
import { dropDatabase, freshDatabase, postgresCpu } from "./service/postgres.ts"
import { analyzeCall, photos, roles } from "./service/roles.ts"
import { buildIfStale, groupCpuMs, RAISED_LIMITS, type Shipped, shippedEnv, shippedServer } from "./service/shipped.ts"
import { startsAndIdle } from "./service/starts.ts"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const args = process.argv.slice(2)
const option = (name: string) => {
  const at = args.indexOf(name)
  return at >= 0 ? args[at + 1] : undefined
}
const against = option("--against")
const databaseUrl = process.env["DATABASE_URL"]
const ROUNDS = Number(process.env["ROUNDS"] ?? "3")
/** Runs of every figure on the same servers, each with its rounds; medians and spreads are printed over them. */
const RUNS = Number(process.env["RUNS"] ?? "1")
const SECONDS = Number(process.env["SECONDS"] ?? "1.5")
const CONNECTIONS = 8
const MAX_REQUESTS = 50_000

const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a")
const script = (name: string) => join(root, "bench/service", name)

/** A server measured: this tree's, or the one `--against` names. */
interface Subject {
  readonly label: string
  readonly server: Shipped
  readonly key: string
  readonly database?: string
}

interface Row {
  readonly figure: string
  readonly goal: string
  readonly values: Record<string, number>
}

/** Summary of alternating loads: medians of each side's rounds. */
const summary = (results: ReadonlyArray<LoadResult>) => ({
  perSecond: median(results.map((r) => r.perSecond)),
  cpuMsPerRequest: median(results.map((r) => r.cpuMsPerRequest)),
  p50: median(results.map((r) => r.p50)),
  p95: median(results.map((r) => r.p95)),
  generatorCpu: median(results.map((r) => r.generatorCpu)),
  statuses: results[0]?.statuses ?? {}
})
type Summary = ReturnType<typeof summary>

const orchestrate = async () => {
  const database = databaseUrl === undefined ? "embedded" : "postgres"
  const trees = [{ label: "this tree", tree: root }, ...(against === undefined ? [] : [{ label: "other tree", tree: resolve(against) }])]
  const load0 = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")
  console.log(`service benchmark on ${database === "embedded" ? "the embedded database" : "PostgreSQL"}: ${trees.map((t) => `${t.label} ${t.tree}`).join(", ")}`)
  console.log(`the server as \`npm start\` runs it; raised by their settings (the defaults would refuse the load): ${Object.keys(RAISED_LIMITS).join(", ")}=1000000`)
  console.log(`${ROUNDS} alternating rounds of ${SECONDS} s, ${CONNECTIONS} connections, keep-alive, 127.0.0.1; load average ${load0}`)
  for (const { tree } of trees) buildIfStale(tree)
  const children: Array<Child> = []
  const subjects: Array<Subject> = []
  const dataDirs: Array<string> = []
  const { large, small } = await photos()
  try {
    const model = await startRole("model", {}, { script: script("model.mjs") })
    children.push(model)
    const modelUrl = `http://127.0.0.1:${model.port}/v1`
    const floor = await startRole("floor", { MODEL_URL: modelUrl }, { script: script("floor.mjs") })
    children.push(floor)
    const reference = await startRole("reference")
    children.push(reference)
    for (const [i, { label, tree }] of trees.entries()) {
      const dataDir = mkdtempSync(join(tmpdir(), "morsel-bench-"))
      dataDirs.push(dataDir)
      const db = databaseUrl === undefined ? undefined : await freshDatabase(databaseUrl, `morsel_bench_${process.pid}_${i}`)
      const env = shippedEnv(db === undefined ? { dataDir } : { url: db.url }, modelUrl)
      const { server, key } = await shippedServer(tree, env)
      console.log(`${label}: npm start to /health on restart ${fmt(server.readyMs / 1000, 1)} s`)
      subjects.push({ label, server, key, ...(db === undefined ? {} : { database: db.name }) })
    }
    /** One run of every figure on the servers started above. */
    const measure = async (runIndex: number) => {
      const run = `bench-${Date.now().toString(36)}-${runIndex}`
      const cpuOf = (s: Subject) => () => groupCpuMs(s.server.group)
      const backends = (s: Subject) => (s.database === undefined ? undefined : () => postgresCpu(databaseUrl!, s.database!))
      const options = { connections: CONNECTIONS, seconds: SECONDS, maxRequests: MAX_REQUESTS }
      const loadSubject = (s: Subject, call: Call, withBackends = true) => {
        const extra = withBackends ? backends(s) : undefined
        return load(s.server.port, s.server.pid, call, { ...options, serverCpu: cpuOf(s), ...(extra ? { extraCpu: extra } : {}) })
      }

      // Peak memory first: three concurrent ~2 MB photos, each server's high-water mark reset before them (the first
      // run's servers have served nothing but their first search).
      const rss: Record<string, number> = {}
      const memory: Record<string, { idle: string; after: string }> = {}
      const three = [0, 1, 2]
      const floorPhoto = (i: number): Call => ({ ...analyzeCall(large, `${run}-floor-${i}`), path: "/v1/analyze?decode" })
      resetPeakRss(floor.pid)
      const floorIdle = describeMappings(mappings(floor.pid))
      await Promise.all(three.map((i) => send(floor.port, floorPhoto(i))))
      rss["floor"] = peakRssMiB(floor.pid)
      memory["floor"] = { idle: floorIdle, after: describeMappings(mappings(floor.pid)) }
      for (const s of subjects) {
        resetPeakRss(s.server.pid)
        const idle = describeMappings(mappings(s.server.pid))
        const replies = await Promise.all(three.map((i) => send(s.server.port, analyzeCall(large, `${run}-rss-${i}`, "en", s.key))))
        if (replies.some((r) => r.status !== 200)) throw new Error(`an analysis failed: ${replies.map((r) => `${r.status} ${r.body.toString("utf8").slice(0, 200)}`)}`)
        rss[s.label] = peakRssMiB(s.server.pid)
        memory[s.label] = { idle, after: describeMappings(mappings(s.server.pid)) }
      }

      console.log(`peak RSS measured (${Object.entries(rss).map(([k, v]) => `${k} ${fmt(v, 0)} MiB`).join(", ")})`)
      // One analysis at a time (c = 1), the large photo, fresh keys, alternating servers; 18 each after 4 to warm up.
      const analysis: Record<string, Array<number>> = { floor: [] }
      for (const s of subjects) {
        analysis[s.label] = []
        await sequential(s.server.port, 4, (i) => analyzeCall(large, `${run}-warm-${i}`, "en", s.key))
      }
      await sequential(floor.port, 4, floorPhoto)
      for (let round = 0; round < 6; round++) {
        for (const s of subjects) analysis[s.label]!.push(...(await sequential(s.server.port, 3, (i) => analyzeCall(large, `${run}-big-${round}-${i}`, "en", s.key))))
        analysis["floor"]!.push(...(await sequential(floor.port, 3, floorPhoto)))
      }

      console.log("analyses at c = 1 measured")
      // The matcher through the API: twenty components against one, on the small photo.
      const matcher: Record<string, number> = {}
      for (const s of subjects) {
        const one: Array<number> = []
        const twenty: Array<number> = []
        for (let round = 0; round < 4; round++) {
          one.push(...(await sequential(s.server.port, 3, (i) => analyzeCall(small, `${run}-one-${round}-${i}`, "en", s.key))))
          twenty.push(...(await sequential(s.server.port, 3, (i) => analyzeCall(small, `${run}-twenty-${round}-${i}`, "lt", s.key))))
        }
        matcher[s.label] = (median(twenty) - median(one)) / 19
      }

      // Replays, challenges, /health and the free food paths under load, every server in each round in turn.
      const replayCall = (s: Subject) => analyzeCall(small, `${run}-replay`, "en", s.key)
      for (const s of subjects) {
        const first = await send(s.server.port, replayCall(s))
        if (first.status !== 200) throw new Error(`the replayed request failed: ${first.status}`)
        await send(floor.port, { method: "POST", path: "/set", body: first.body })
      }
      const unfunded: Call = { ...analyzeCall(small, `${run}-unpaid`), headers: { "idempotency-key": `${run}-unpaid` } }
      const text = await acceptsText(subjects[0]!)
      const foodCalls: ReadonlyArray<{ readonly name: string; readonly call: Call | undefined }> = [
        { name: "GET /v1/foods?q=chicken breast", call: { method: "GET", path: "/v1/foods?q=chicken%20breast" } },
        { name: "POST /v1/nutrition, 20 items", call: nutritionItems(20) },
        { name: "POST /v1/nutrition, 10 foods in words", call: text ? nutritionText : undefined }
      ]
      const kinds: Array<{ readonly name: string; readonly subject: (s: Subject) => Call | undefined; readonly baseline?: { readonly child: Child; readonly call: Call } }> = [
        { name: "replay", subject: replayCall, baseline: { child: floor, call: replayCall(subjects[0]!) } },
        { name: "challenge", subject: () => unfunded, baseline: { child: reference, call: unfunded } },
        { name: "GET /health", subject: () => ({ method: "GET", path: "/health" }), baseline: { child: floor, call: { method: "GET", path: "/health" } } },
        ...foodCalls.map((f) => ({ name: f.name, subject: () => f.call })),
        // The same calls through the HttpApi stack: a lane leaves a request with an Origin (a browser's) to the stack,
        // and the server's own loopback origin is trusted. Measured on this tree only.
        { name: "challenge through the stack", subject: (s) => (s === subjects[0] ? withOrigin(unfunded, s) : undefined) },
        { name: "POST /v1/nutrition, 20 items, through the stack", subject: (s) => (s === subjects[0] ? withOrigin(nutritionItems(20), s) : undefined) }
      ]
      const results = new Map<string, Array<LoadResult>>()
      const push = (key: string, result: LoadResult) => results.set(key, [...(results.get(key) ?? []), result])
      for (let round = 0; round < ROUNDS; round++) {
        for (const kind of kinds) {
          for (const s of subjects) {
            const call = kind.subject(s)
            if (call !== undefined) push(`${kind.name}|${s.label}`, await loadSubject(s, call, kind.name !== "GET /health"))
          }
          if (kind.baseline) push(`${kind.name}|baseline`, await load(kind.baseline.child.port, kind.baseline.child.pid, kind.baseline.call, options))
        }
      }
      const loads: Record<string, Summary> = Object.fromEntries([...results].map(([key, rs]) => [key, summary(rs)]))
      const ratio = (name: string, s: string) => (loads[`${name}|${s}`]?.perSecond ?? Number.NaN) / (loads[`${name}|baseline`]?.perSecond ?? Number.NaN)
      const per = (f: (s: string) => number) => Object.fromEntries(subjects.map((s) => [s.label, f(s.label)]))
      const rows: Array<Row> = [
        { figure: "402 challenge throughput vs @x402/express", goal: ">= 1.0", values: per((s) => ratio("challenge", s)) },
        { figure: "analysis (c = 1, 1.9 MB JPEG) vs the floor", goal: "<= 1.3", values: per((s) => median(analysis[s]!) / median(analysis["floor"]!)) },
        { figure: "peak RSS, three concurrent 2 MB photos, vs the floor", goal: "<= 1.5", values: per((s) => rss[s]! / rss["floor"]!) },
        { figure: "replay throughput vs the floor sending the same bytes", goal: ">= 0.1", values: per((s) => ratio("replay", s)) },
        { figure: "GET /health throughput vs the floor's", goal: "—", values: per((s) => ratio("GET /health", s)) },
        { figure: "matcher cost per item through the API (ms)", goal: "<= 0.25", values: per((s) => matcher[s]!) }
      ]
      const here = subjects[0]!.label
      const stackVsLane = (stack: string, lane: string) => (loads[`${stack}|${here}`]?.perSecond ?? Number.NaN) / (loads[`${lane}|${here}`]?.perSecond ?? Number.NaN)
      rows.push({ figure: "402 through the HttpApi stack vs its lane (throughput)", goal: "—", values: { [here]: stackVsLane("challenge through the stack", "challenge") } })
      rows.push({
        figure: "nutrition, 20 items, through the stack vs its lane",
        goal: "—",
        values: { [here]: stackVsLane("POST /v1/nutrition, 20 items, through the stack", "POST /v1/nutrition, 20 items") }
      })
      for (const f of foodCalls) {
        rows.push({ figure: `${f.name}, throughput vs GET /health`, goal: "—", values: per((s) => (loads[`${f.name}|${s}`]?.perSecond ?? Number.NaN) / (loads[`GET /health|${s}`]?.perSecond ?? Number.NaN)) })
      }
      console.log(`\n${"figure".padEnd(58)} ${"goal".padStart(8)} ${subjects.map((s) => s.label.padStart(11)).join(" ")}`)
      for (const row of rows) console.log(`${row.figure.padEnd(58)} ${row.goal.padStart(8)} ${subjects.map((s) => fmt(row.values[s.label] ?? Number.NaN).padStart(11)).join(" ")}`)
      console.log("\nunder load (medians of the rounds): req/s, server CPU ms per request (npm start's group; PostgreSQL's backends added on PostgreSQL), p50 / p95 ms, load generator CPU (share of a core)")
      for (const [key, l] of Object.entries(loads)) {
        const [name, side] = key.split("|")
        const who = side === "baseline" ? (name === "challenge" ? "@x402/express" : "floor") : side
        console.log(
          `${`${name} — ${who}`.padEnd(58)} ${fmt(l.perSecond, 0).padStart(7)} req/s ${fmt(l.cpuMsPerRequest, 3).padStart(7)} ms CPU ${fmt(l.p50).padStart(6)} / ${fmt(l.p95).padStart(6)} ms  generator ${fmt(l.generatorCpu)}  ${JSON.stringify(l.statuses)}`
        )
      }
      if (!text) console.log("POST /v1/nutrition with {text}: n/a (this server does not accept a meal in words)")
      console.log(`\nanalysis at c = 1, median ms: ${Object.entries(analysis).map(([k, v]) => `${k} ${fmt(median(v), 1)}`).join(", ")} (${(large.length / 1e6).toFixed(2)} MB JPEG)`)
      console.log(`peak RSS serving three photos, MiB: ${Object.entries(rss).map(([k, v]) => `${k} ${fmt(v, 0)}`).join(", ")}`)
      for (const [who, m] of Object.entries(memory)) console.log(`memory of ${who}: ready ${m.idle}\n  after the photos ${m.after}`)
        return { rows, loads, analysis, rss, memory, matcher }
      }
    const runs: Array<Awaited<ReturnType<typeof measure>>> = []
    for (let i = 0; i < RUNS; i++) {
      if (RUNS > 1) console.log(`\n— run ${i + 1} of ${RUNS}`)
      runs.push(await measure(i))
    }
    const text = await acceptsText(subjects[0]!)
    if (RUNS > 1) {
      console.log(`\n${`figure: median of ${RUNS} runs [lowest–highest]`.padEnd(58)} ${"goal".padStart(8)} ${subjects.map((s) => s.label.padStart(19)).join(" ")}`)
      for (const [r, row] of runs[0]!.rows.entries()) {
        const cell = (label: string) => {
          const values = runs.map((run) => run.rows[r]!.values[label] ?? Number.NaN).sort((x, y) => x - y)
          return `${fmt(median(values))} [${fmt(values[0]!)}–${fmt(values[values.length - 1]!)}]`.padStart(19)
        }
        console.log(`${row.figure.padEnd(58)} ${row.goal.padStart(8)} ${subjects.map((s) => cell(s.label)).join(" ")}`)
      }
    }
    const growthFigures = args.includes("--growth") ? await growth({ subjects, floor, databaseUrl, modelUrl, trees }) : undefined
    const starts = args.includes("--starts") ? await startsAndIdle(root, modelUrl, databaseUrl) : undefined

    const resultsDir = join(root, "bench/results")
    mkdirSync(resultsDir, { recursive: true })
    const file = join(resultsDir, `service-${database}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
    const loadAfter = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")
    const report = { database, at: new Date().toISOString(), loadAverage: [load0, loadAfter], trees, restartMs: Object.fromEntries(subjects.map((s) => [s.label, s.server.readyMs])), runs, text, growth: growthFigures, starts }
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`)
    console.log(`\nload average ${load0} before, ${loadAfter} after; written ${file}`)
  } finally {
    for (const s of subjects) await s.server.stop()
    for (const child of children) await child.stop()
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true })
    if (databaseUrl !== undefined) for (const s of subjects) if (s.database !== undefined) await dropDatabase(databaseUrl, s.database)
  }
}

/** POST /v1/nutrition with `count` items, every other one by text and the rest by id. */
const nutritionItems = (count: number): Call => {
  const texts = ["rice, white, cooked", "chicken breast", "broccoli", "olive oil", "tofu"]
  const ids = ["20045", "05064", "11090", "04053", "16427"]
  const items = Array.from({ length: count }, (_, i) => (i % 2 === 0 ? { query: texts[Math.floor(i / 2) % texts.length], grams: 100 } : { fdc_id: ids[i % ids.length], grams: 50 }))
  return { method: "POST", path: "/v1/nutrition", body: Buffer.from(JSON.stringify({ items })) }
}

/** The same call as a page of the service itself would send it (an Origin the service trusts). */
const withOrigin = (call: Call, s: Subject): Call => ({ ...call, headers: { ...call.headers, origin: `http://127.0.0.1:${s.server.port}` } })

/** A meal of ten foods in words. */
const nutritionText: Call = {
  method: "POST",
  path: "/v1/nutrition",
  body: Buffer.from(
    JSON.stringify({
      text: "2 eggs, a slice of toast with butter, a banana, 150 g rice, cooked, a cup of black beans, 100 g chicken breast, a tablespoon of olive oil, an apple, a glass of milk and 30 g cheddar cheese"
    })
  )
}

/** Whether the server reads a meal in words (`{text}`); one that does not answers 400. */
const acceptsText = async (s: Subject) => (await send(s.server.port, nutritionText)).status === 200

/**
 * The PostgreSQL pass after the embedded one, when only TEST_DATABASE_URL names a server: this script again with
 * DATABASE_URL set to it (its databases are made on that server and dropped).
 */
const postgresPass = (serverUrl: string) =>
  new Promise<void>((done, fail) =>
    spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), ...args], { stdio: "inherit", env: { ...process.env, DATABASE_URL: serverUrl } }).on(
      "exit",
      (code) => (code === 0 ? done() : fail(new Error(`the PostgreSQL pass exited with ${code}`)))
    )
  )

const isRole = (name: string | undefined): name is keyof typeof roles => name !== undefined && Object.hasOwn(roles, name)
const role = args[0]
if (isRole(role)) {
  await roles[role]()
} else {
  await orchestrate()
  const testServer = process.env["TEST_DATABASE_URL"]
  if (databaseUrl === undefined && testServer !== undefined) {
    console.log("")
    await postgresPass(testServer)
  }
}
