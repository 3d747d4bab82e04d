/**
 * `npm run bench:service`: the service's own costs side by side with their baselines in one run — replays and
 * GET /health against a bare `node:http` server, the 402 challenge against `@x402/express`, analysis
 * overhead and peak memory against the floor (bare `node:http` and sharp at its defaults, decoding and downscaling
 * the same photos), the matcher's cost per item through the API, `npm start` to a healthy server, and the idle
 * memory of the starts a user makes, each with where its memory goes. Embedded database by default, PostgreSQL
 * with DATABASE_URL; with TEST_DATABASE_URL alone, the embedded database and then PostgreSQL on that server.
 * Prints the ratios and writes them as JSON under bench/results/.
 */
import { execFile, spawn } from "node:child_process"
import { randomBytes, randomUUID } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { Reactivity } from "@effect/experimental"
import { Effect, Redacted } from "effect"
import { build } from "esbuild"
import { type Call, type Child, type LoadResult, cpuMs, freePort, healthy, load, median, peakRssMiB, resetPeakRss, send, sequential, startRole } from "./service/load.ts"
import { container } from "./service/container.ts"
import { type Breakdown, describeBreakdown, describeMappings, type Mappings, mappings } from "./service/memory.ts"
import { FOODS_DIR } from "./service/morsel.ts"
import { analyzeCall, morselEnv, photos, roles } from "./service/roles.ts"
import { NODE_BUNDLE } from "../bin/bundling.js"
import { SERVE_ENV, SERVE_NODE_OPTIONS } from "../bin/tuning.js"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const databaseUrl = process.env["DATABASE_URL"]
const ROUNDS = 3
const SECONDS = 1.5
const CONNECTIONS = 8
const MAX_REQUESTS = 20_000

/** The floor: bare node:http and sharp at its defaults, nothing of morsel loaded (plain Node, no TypeScript loader). */
const floorScript = join(root, "bench/service/floor.mjs")
/**
 * morsel's role bundled as the shipped command line is (bin/bundle.js), chunks loaded on demand included, run by plain
 * Node: its memory and start are the product's, not those of a TypeScript loader compiling the sources, nor of code
 * the server would not load. Written inside the tree so that the packages left outside the bundle resolve from
 * node_modules.
 */
const bundleMorselRole = async (): Promise<string> => {
  const outdir = join(root, "dist/bench")
  rmSync(outdir, { recursive: true, force: true })
  await build({
    absWorkingDir: root,
    entryPoints: { "morsel-role": join(root, "bench/service/morselRole.ts") },
    outdir,
    ...NODE_BUNDLE,
    external: [...NODE_BUNDLE.external, "tsx"]
  })
  return join(outdir, "morsel-role.mjs")
}

/**
 * The Node options and environment `morsel serve` runs a server with (bin/tuning.js): the benchmark's servers start
 * with them, so that bin/morsel.js does not start itself again and the process measured is the server.
 */
const serverNodeOptions = SERVE_NODE_OPTIONS
const serverEnv = SERVE_ENV

/** How long a started server is left alone before its idle memory is read. */
const IDLE_SECONDS = 15

const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a")

/** CPU of the PostgreSQL backends serving the benchmark's database (local server only; 0 when unreadable). */
const backendsCpu = async (): Promise<number> => {
  if (databaseUrl === undefined) return 0
  const pids = await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const sql = yield* PgClient.make({ url: Redacted.make(databaseUrl) })
        return yield* sql<{ pid: number }>`
          SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`
      })
    ).pipe(Effect.provide(Reactivity.layer), Effect.orElseSucceed(() => []))
  )
  let total = 0
  for (const { pid } of pids) {
    try {
      total += cpuMs(pid)
    } catch {
      // a backend that ended meanwhile, or a server on another machine
    }
  }
  return total
}

/** Alternating rounds of the same load on a server and its baseline: medians of throughput and CPU per request. */
const sideBySide = async (subject: Child, subjectCall: Call, baseline: Child, baselineCall: Call, withBackends: boolean) => {
  const options = { connections: CONNECTIONS, seconds: SECONDS, maxRequests: MAX_REQUESTS }
  const ours: Array<LoadResult> = []
  const theirs: Array<LoadResult> = []
  for (let round = 0; round < ROUNDS; round++) {
    ours.push(await load(subject.port, subject.pid, subjectCall, withBackends ? { ...options, extraCpu: backendsCpu } : options))
    theirs.push(await load(baseline.port, baseline.pid, baselineCall, options))
  }
  const summary = (results: typeof ours) => ({
    perSecond: median(results.map((r) => r.perSecond)),
    cpuMsPerRequest: median(results.map((r) => r.cpuMsPerRequest)),
    statuses: results[0]?.statuses ?? {}
  })
  const a = summary(ours)
  const b = summary(theirs)
  return { subject: a, baseline: b, throughputRatio: a.perSecond / b.perSecond, cpuRatio: a.cpuMsPerRequest / b.cpuMsPerRequest }
}

/** `npm start` on a built tree until GET /health answers 200, in ms; the whole process group is stopped after. */
const startOnce = async (dataDir: string): Promise<number> => {
  const port = await freePort()
  const started = performance.now()
  const child = spawn("npm", ["start", "--silent"], {
    cwd: root,
    detached: true,
    stdio: "ignore",
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", MORSEL_DATA_DIR: dataDir, LOG_LEVEL: "warning" }
  })
  try {
    while (performance.now() - started < 90_000) {
      if (await healthy(port)) return performance.now() - started
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    return Number.NaN
  } finally {
    if (child.exitCode === null && child.pid !== undefined) {
      const exited = new Promise((resolve) => child.on("exit", resolve))
      process.kill(-child.pid, "SIGTERM")
      await exited
    }
  }
}

/** The first start creates the embedded database; the second is a restart, as a deployed server does it. */
const startUp = async () => {
  if (!existsSync(join(root, "dist"))) return { firstMs: Number.NaN, restartMs: Number.NaN }
  const dataDir = mkdtempSync(join(tmpdir(), "morsel-bench-start-"))
  try {
    return { firstMs: await startOnce(dataDir), restartMs: await startOnce(dataDir) }
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** `morsel serve` (built tree) started as a user starts it, until /health answers; `stop` ends it. */
const startServe = async (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>, enter?: (pid: number) => void) => {
  const port = await freePort()
  const started = performance.now()
  const child = spawn(process.execPath, [...serverNodeOptions, join(root, "bin/morsel.js"), "serve", ...args], {
    cwd: root,
    stdio: "ignore",
    env: { ...process.env, ...serverEnv, ...env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warning" }
  })
  const stop = async () => {
    child.kill("SIGTERM")
    if (child.exitCode === null) await new Promise((resolve) => child.on("exit", resolve))
  }
  try {
    enter?.(child.pid ?? 0)
    for (;;) {
      if (child.exitCode !== null) throw new Error(`morsel serve ${args.join(" ")} exited with ${child.exitCode}`)
      if (await healthy(port)) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  } catch (error) {
    await stop()
    throw error
  }
  return { port, pid: child.pid ?? 0, readyMs: performance.now() - started, stop }
}

/** `morsel serve` (built tree) until /health answers, then IDLE_SECONDS with nothing served: its memory from /proc. */
const idleAfterStart = async (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>): Promise<Mappings & { readyMs: number }> => {
  const server = await startServe(args, env)
  try {
    await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000))
    return { ...mappings(server.pid), readyMs: server.readyMs }
  } finally {
    await server.stop()
  }
}

/** The size of the small container the sandbox must fit with three concurrent photos. */
const CONTAINER_MIB = 512

/**
 * `morsel serve --sandbox` serving three concurrent photos, paid with credits bought at its checkout: its peak (its
 * start included), and, where this machine gives one, the peak of a container limited to CONTAINER_MIB that it runs in
 * (page cache included) with the allocations refused there.
 */
const sandboxServingPhotos = async (photo: Buffer) => {
  const box = container(CONTAINER_MIB)
  try {
    const server = await startServe(["--sandbox"], {}, box?.enter)
    try {
      const key = `Bearer morsel_test_${randomBytes(32).toString("hex")}`
      const checkout = await send(server.port, {
        method: "POST",
        path: "/v1/credits/checkout",
        headers: { authorization: key },
        body: Buffer.from(JSON.stringify({ order_id: randomUUID() }))
      })
      const session = String((JSON.parse(checkout.body.toString("utf8")) as { session_id?: string }).session_id)
      const paid = await send(server.port, { method: "POST", path: `/sandbox/checkout/${session}/pay` })
      if (paid.status !== 200) throw new Error(`the sandbox's checkout answered ${checkout.status}, then ${paid.status}`)
      const analysed = await Promise.all(
        [0, 1, 2].map((i) => send(server.port, { ...analyzeCall(photo, ""), headers: { authorization: key, "idempotency-key": `bench-sandbox-photo-${i}` } }))
      )
      if (analysed.some((reply) => reply.status !== 200)) throw new Error(`a sandbox analysis failed: ${analysed.map((r) => r.status)}`)
      return {
        serverPeak: peakRssMiB(server.pid),
        container: box === undefined ? undefined : { kind: box.kind, peak: box.peakMiB(), refusals: box.refusals() }
      }
    } finally {
      await server.stop()
    }
  } finally {
    box?.remove()
  }
}

/** `morsel fooddb import` of the benchmark's foods (SR28 when at hand) into the database `env` names. */
const importFoods = (env: Readonly<Record<string, string>>) =>
  new Promise<void>((resolve, reject) => {
    execFile(process.execPath, [join(root, "bin/morsel.js"), "fooddb", "import", FOODS_DIR], { env: { ...process.env, ...env, LOG_LEVEL: "warning" } }, (error) =>
      error ? reject(error) : resolve()
    )
  })

/**
 * Idle memory of the starts a user makes: on PostgreSQL; on the embedded database a first start on a new folder,
 * a restart on it with SR28 imported, and the sandbox (in-memory database, shipped foods).
 */
const idleStarts = async () => {
  if (!existsSync(join(root, "dist"))) return []
  if (databaseUrl !== undefined) {
    // The morsel role stored the benchmark's foods in this database already.
    return [{ start: "PostgreSQL (DATABASE_URL), foods imported", goal: 150, ...(await idleAfterStart([], { DATABASE_URL: databaseUrl })) }]
  }
  const dataDir = mkdtempSync(join(tmpdir(), "morsel-bench-idle-"))
  try {
    const env = { MORSEL_DATA_DIR: join(dataDir, "data") }
    const first = await idleAfterStart([], env)
    await importFoods(env)
    const restart = await idleAfterStart([], env)
    const sandbox = await idleAfterStart(["--sandbox"], {})
    return [
      { start: "embedded, first start on a new folder", goal: 300, ...first },
      { start: "embedded, restart, foods imported", goal: 300, ...restart },
      { start: "morsel serve --sandbox", goal: 300, ...sandbox }
    ]
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

const orchestrate = async () => {
  const database = databaseUrl === undefined ? "embedded (PGlite)" : "PostgreSQL (DATABASE_URL)"
  console.log(`service benchmark on ${database}; ${ROUNDS} alternating rounds of ${SECONDS} s, ${CONNECTIONS} connections, on 127.0.0.1`)
  const dataDir = mkdtempSync(join(tmpdir(), "morsel-bench-"))
  const env = morselEnv(dataDir)
  const { large, small } = await photos()
  const children: Array<Child> = []
  try {
    const bare = await startRole("floor", {}, { script: floorScript })
    children.push(bare)
    const reference = await startRole("reference")
    children.push(reference)
    // A deployed server restarts on a database that exists and holds its foods: that is what is measured.
    const role = { script: await bundleMorselRole(), nodeArgs: ["--expose-gc", ...serverNodeOptions] }
    // The first start creates the embedded database and stores the benchmark's foods (as `fooddb import` would).
    await (await startRole("morsel", { ...serverEnv, ...env }, role)).stop()
    const morsel = await startRole("morsel", { ...serverEnv, ...env }, role)
    children.push(morsel)
    const run = `bench-${Date.now().toString(36)}`

    // Peak memory first, on fresh processes: three concurrent ~2 MB photos. The peak of the start itself is
    // kept apart (the embedded database's first initdb is a one-off that a restart does not repeat).
    const startPeak = { subject: peakRssMiB(morsel.pid), baseline: peakRssMiB(bare.pid) }
    const memoryIdle = { subject: await morsel.ask<Breakdown>("memory"), baseline: mappings(bare.pid) }
    resetPeakRss(morsel.pid)
    resetPeakRss(bare.pid)
    const three = [0, 1, 2]
    const analysed = await Promise.all(three.map((i) => send(morsel.port, analyzeCall(large, `${run}-rss-${i}`))))
    if (analysed.some((reply) => reply.status !== 200)) throw new Error(`an analysis failed: ${analysed.map((r) => r.status)}`)
    const bareDecode = (i: number): Call => ({ ...analyzeCall(large, `bare-${i}`), path: "/v1/analyze?decode" })
    await Promise.all(three.map((i) => send(bare.port, bareDecode(i))))
    const rss = { subject: peakRssMiB(morsel.pid), baseline: peakRssMiB(bare.pid), startPeak }
    const memoryAfter = { subject: await morsel.ask<Breakdown>("memory"), baseline: mappings(bare.pid) }

    // Analysis overhead at c = 1: the large photo, fresh keys, alternating servers; 36 each after 4 to warm up.
    const overheadSubject: Array<number> = []
    const overheadBaseline: Array<number> = []
    await sequential(morsel.port, 4, (i) => analyzeCall(large, `${run}-warm-${i}`))
    await sequential(bare.port, 4, bareDecode)
    for (let round = 0; round < 12; round++) {
      overheadSubject.push(...(await sequential(morsel.port, 3, (i) => analyzeCall(large, `${run}-big-${round}-${i}`))))
      overheadBaseline.push(...(await sequential(bare.port, 3, bareDecode)))
    }
    const overhead = { subjectMs: median(overheadSubject), baselineMs: median(overheadBaseline) }

    // The matcher through the API: twenty components against one, on the small photo.
    const one: Array<number> = []
    const twenty: Array<number> = []
    for (let round = 0; round < 8; round++) {
      one.push(...(await sequential(morsel.port, 3, (i) => analyzeCall(small, `${run}-one-${round}-${i}`, "en"))))
      twenty.push(...(await sequential(morsel.port, 3, (i) => analyzeCall(small, `${run}-twenty-${round}-${i}`, "lt"))))
    }
    const matcherMsPerItem = (median(twenty) - median(one)) / 19

    // A completed request replayed, against a bare server answering the same bytes.
    const replayCall = analyzeCall(small, `${run}-replay`)
    const first = await send(morsel.port, replayCall)
    if (first.status !== 200) throw new Error(`the replayed request failed: ${first.status} ${first.body.toString("utf8")}`)
    await send(bare.port, { method: "POST", path: "/set", body: first.body })
    const replay = await sideBySide(morsel, replayCall, bare, replayCall, true)

    // The 402 challenge of an unfunded request, against `@x402/express`.
    const unfunded: Call = { ...replayCall, headers: { "idempotency-key": `${run}-unpaid` } }
    const challenge = await sideBySide(morsel, unfunded, reference, unfunded, true)

    const health = await sideBySide(morsel, { method: "GET", path: "/health" }, bare, { method: "GET", path: "/health" }, false)
    const foodIndexMiB = await morsel.ask<number>("food index", 120_000)

    for (const child of children.splice(0)) await child.stop()
    const start = await startUp()
    const idle = await idleStarts()
    // The sandbox brings its own database and foods: measured once, in the embedded pass.
    const sandboxPhotos = databaseUrl === undefined && existsSync(join(root, "dist")) ? await sandboxServingPhotos(large) : undefined

    const rows = [
      { figure: "replay throughput vs bare node:http", value: replay.throughputRatio, goal: ">= 0.1" },
      { figure: "402 challenge throughput vs @x402/express", value: challenge.throughputRatio, goal: ">= 1.0" },
      { figure: "analysis overhead vs bare server that downscales (c = 1)", value: overhead.subjectMs / overhead.baselineMs, goal: "<= 1.3" },
      { figure: "peak RSS vs bare server decoding the same 3 photos", value: rss.subject / rss.baseline, goal: "<= 1.5" },
      { figure: "matcher cost per item through the API (ms)", value: matcherMsPerItem, goal: "<= 0.25" },
      { figure: "npm start to /health 200, built tree, restart (s)", value: start.restartMs / 1000, goal: "<= 2" },
      ...idle.map((i) => ({ figure: `idle RSS, ${i.start} (MiB)`, value: i.rss, goal: `<= ${i.goal}` })),
      ...(sandboxPhotos === undefined
        ? []
        : [
            {
              figure: `sandbox + 3 photos, peak ${sandboxPhotos.container ? `of a ${CONTAINER_MIB} MiB container` : "RSS with its start"} (MiB)`,
              value: sandboxPhotos.container?.peak ?? sandboxPhotos.serverPeak,
              goal: `<= ${CONTAINER_MIB}`
            }
          ])
    ]
    console.log("")
    for (const row of rows) console.log(`${row.figure.padEnd(60)} ${fmt(row.value, 3).padStart(8)}   goal ${row.goal}`)
    console.log("")
    const cpuLine = (name: string, r: typeof replay) =>
      console.log(
        `${name.padEnd(10)} ${fmt(r.subject.perSecond, 0)} req/s, ${fmt(r.subject.cpuMsPerRequest, 3)} ms CPU/req` +
          `${databaseUrl && name !== "health" ? " (service + backends)" : ""}; baseline ${fmt(r.baseline.perSecond, 0)} req/s, ` +
          `${fmt(r.baseline.cpuMsPerRequest, 3)} ms CPU/req; CPU ratio ${fmt(r.cpuRatio, 1)}× ${JSON.stringify(r.subject.statuses)}`
      )
    cpuLine("replay", replay)
    cpuLine("challenge", challenge)
    cpuLine("health", health)
    console.log(`analysis   ${fmt(overhead.subjectMs, 1)} ms vs ${fmt(overhead.baselineMs, 1)} ms (${(large.length / 1e6).toFixed(2)} MB JPEG)`)
    console.log(
      `peak RSS   ${fmt(rss.subject, 0)} MiB vs ${fmt(rss.baseline, 0)} MiB serving the photos; ` +
        `${fmt(startPeak.subject, 0)} MiB vs ${fmt(startPeak.baseline, 0)} MiB while starting`
    )
    console.log(`\nmemory of morsel at idle (after start, nothing served):\n  ${describeBreakdown(memoryIdle.subject).replace("\n", "\n  ")}`)
    console.log(`memory of morsel after the three photos:\n  ${describeBreakdown(memoryAfter.subject).replace("\n", "\n  ")}`)
    console.log(`food index of ${FOODS_DIR}: ${fmt(foodIndexMiB, 0)} MiB of V8 heap`)
    console.log(`memory of the floor at idle: ${describeMappings(memoryIdle.baseline)}`)
    console.log(`memory of the floor after the photos: ${describeMappings(memoryAfter.baseline)}`)
    for (const i of idle) console.log(`idle ${IDLE_SECONDS} s after start, ${i.start} (ready in ${fmt(i.readyMs / 1000, 1)} s): ${describeMappings(i)}`)
    if (sandboxPhotos !== undefined) {
      const box = sandboxPhotos.container
      console.log(
        `sandbox serving three concurrent photos: server peak ${fmt(sandboxPhotos.serverPeak, 0)} MiB (its start included)` +
          (box === undefined
            ? `; no memory cgroup to run it in here`
            : `; in a ${box.kind} limited to ${CONTAINER_MIB} MiB, peak ${fmt(box.peak, 0)} MiB with the page cache, ${box.refusals} allocations refused`)
      )
    }
    console.log("")
    console.log(`npm start  ${fmt(start.firstMs / 1000, 1)} s ${databaseUrl === undefined ? "on a new embedded database" : "on the first start"}, ${fmt(start.restartMs / 1000, 1)} s on restart`)
    console.log(`matcher    1 item ${fmt(median(one), 1)} ms, 20 items ${fmt(median(twenty), 1)} ms`)

    const resultsDir = join(root, "bench/results")
    mkdirSync(resultsDir, { recursive: true })
    const file = join(resultsDir, `service-${databaseUrl === undefined ? "embedded" : "postgres"}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
    const report = { database, at: new Date().toISOString(), rows, replay, challenge, health, overhead, rss, memoryIdle, memoryAfter, foodIndexMiB, idle, sandboxPhotos, matcher: { one, twenty, matcherMsPerItem }, start }
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`)
    console.log(`\nwritten ${file}`)
  } finally {
    for (const child of children) await child.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/**
 * The PostgreSQL pass after the embedded one, when only TEST_DATABASE_URL names a server: on a database of its own
 * there (`morsel_bench`, made when missing), by this script again with DATABASE_URL.
 */
const postgresPass = async (serverUrl: string) => {
  const url = new URL(serverUrl)
  url.pathname = "/morsel_bench"
  await Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(PgClient.make({ url: Redacted.make(serverUrl), maxConnections: 1 }), (sql) =>
        sql.unsafe("CREATE DATABASE morsel_bench").pipe(Effect.catchAll(() => Effect.void))
      )
    ).pipe(Effect.provide(Reactivity.layer))
  )
  console.log("")
  await new Promise<void>((resolve, reject) =>
    spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url)], { stdio: "inherit", env: { ...process.env, DATABASE_URL: url.toString() } }).on(
      "exit",
      (code) => (code === 0 ? resolve() : reject(new Error(`the PostgreSQL pass exited with ${code}`)))
    )
  )
}

const isRole = (name: string | undefined): name is keyof typeof roles => name !== undefined && Object.hasOwn(roles, name)
const role = process.argv[2]
if (isRole(role)) {
  await roles[role]()
} else {
  await orchestrate()
  const testServer = process.env["TEST_DATABASE_URL"]
  if (databaseUrl === undefined && testServer !== undefined) await postgresPass(testServer)
}
