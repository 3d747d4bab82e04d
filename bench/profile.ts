/**
 * `npx tsx bench/profile.ts <scenario> [seconds]`: runs the server as `npm start` runs it under the sampling profiler, loads it
 * with one scenario (replay, challenge, health, analyze, matcher, search, nutrition, nutrition-text) twice and prints where the CPU of the second,
 * warm pass went: the functions with the most self time and the packages they belong to. The profile itself stays
 * in bench/results/profiles/.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Call, load, send, sequential, startRole } from "./service/load.ts"
import { analyzeCall, nutritionCall, photos } from "./service/roles.ts"
import { buildIfStale, shippedEnv, shippedServer } from "./service/shipped.ts"

const root = dirname(dirname(fileURLToPath(import.meta.url)))

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly hitCount?: number
}

interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly startTime: number
  readonly endTime: number
}

/** Where a script belongs: its npm package, our own source folder, or the runtime. */
const ownerOf = (url: string) => {
  const modules = url.lastIndexOf("node_modules/")
  if (modules >= 0) {
    const rest = url.slice(modules + "node_modules/".length).split("/")
    const scoped = rest[0]?.startsWith("@") ? 2 : 1
    // The package and its file, without the build folders in between: effect/fiberRuntime.js.
    return `${rest.slice(0, scoped).join("/")}/${rest[rest.length - 1] ?? ""}`
  }
  const source = url.indexOf("/src/")
  if (source >= 0) return url.slice(source + 1)
  return url === "" ? "(native/gc/idle)" : url.replace(/^node:/, "node:")
}

const summarise = (profile: Profile, top: number) => {
  const total = profile.samples.length
  const byFunction = new Map<string, number>()
  const byOwner = new Map<string, number>()
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0
    if (hits === 0) continue
    const { functionName, url, lineNumber } = node.callFrame
    const where = `${functionName || "(anonymous)"} ${ownerOf(url)}:${lineNumber + 1}`
    byFunction.set(where, (byFunction.get(where) ?? 0) + hits)
    const owner = functionName === "(idle)" ? "(idle)" : functionName === "(garbage collector)" ? "(gc)" : ownerOf(url)
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + hits)
  }
  const print = (title: string, map: Map<string, number>, count: number) => {
    console.log(`\n${title}`)
    for (const [name, hits] of [...map].sort((a, b) => b[1] - a[1]).slice(0, count)) {
      console.log(`${((100 * hits) / total).toFixed(1).padStart(6)} %  ${name}`)
    }
  }
  print("self time by package or source file", byOwner, 25)
  print("self time by function", byFunction, top)
}

/** The scenarios, each driving a server at `port` funded with `key`. */
const scenarios = async (key: string): Promise<Record<string, (port: number) => Promise<unknown>>> => {
  const { large, small } = await photos()
  const run = `profile-${Date.now().toString(36)}`
  let passes = 0
  const steady = (call: Call) => (port: number) => load(port, 0, call, { connections: 8, seconds, maxRequests: 1_000_000, serverCpu: () => 0 })
  const replay = analyzeCall(small, `${run}-replay`, "en", key)
  return {
    replay: async (port) => {
      await send(port, replay)
      return steady(replay)(port)
    },
    challenge: steady({ ...replay, headers: { "idempotency-key": `${run}-unpaid` } }),
    health: steady({ method: "GET", path: "/health" }),
    // New analyses need new keys in each pass: a key already answered is only replayed.
    analyze: (port) => sequential(port, Math.max(4, Math.round(seconds * 5)), (i) => analyzeCall(large, `${run}-big-${++passes}-${i}`, "en", key)),
    matcher: (port) => sequential(port, Math.max(10, Math.round(seconds * 20)), (i) => analyzeCall(small, `${run}-twenty-${++passes}-${i}`, "lt", key)),
    // The free food paths: a search, and nutrition for twenty items half by text, half by id.
    search: steady({ method: "GET", path: "/v1/foods?q=chicken%20breast" }),
    nutrition: steady(nutritionCall(20)),
    "nutrition-text": steady(nutritionCall(20, true))
  }
}

const seconds = Number(process.argv[3] ?? "5")

/** The server as `npm start` runs it (bench/service/shipped.ts), with the profiler loaded into it. */
const profileOnce = async (scenario: string) => {
  const profiles = join(root, "bench/results/profiles")
  mkdirSync(profiles, { recursive: true })
  const file = join(profiles, `${scenario}-${new Date().toISOString().replace(/[:.]/g, "-")}.cpuprofile`)
  const dir = mkdtempSync(join(tmpdir(), "morsel-profile-"))
  buildIfStale(root)
  const model = await startRole("model", {}, { script: join(root, "bench/service/model.mjs") })
  const env = { ...shippedEnv({ dataDir: dir }, `http://127.0.0.1:${model.port}/v1`), NODE_OPTIONS: `--import=${join(root, "bench/service/profiler.mjs")}`, PROFILE_FILE: file }
  const { server, key } = await shippedServer(root, process.env["DATABASE_URL"] ? { ...env, DATABASE_URL: process.env["DATABASE_URL"] } : env)
  try {
    const all = await scenarios(key)
    const drive = all[scenario]
    if (drive === undefined) throw new Error(`unknown scenario ${scenario}; one of ${Object.keys(all).join(", ")}`)
    // A first pass warms the code up; only the second is profiled.
    await drive(server.port)
    process.kill(server.pid, "SIGUSR2")
    await new Promise((resolve) => setTimeout(resolve, 100))
    console.log(JSON.stringify(await drive(server.port)).slice(0, 300))
    process.kill(server.pid, "SIGUSR2")
    for (let i = 0; i < 100 && !existsSync(file); i++) await new Promise((resolve) => setTimeout(resolve, 100))
  } finally {
    await server.stop()
    await model.stop()
    rmSync(dir, { recursive: true, force: true })
  }
  summarise(JSON.parse(readFileSync(file, "utf8")) as Profile, Number(process.env["TOP"] ?? "40"))
  console.log(`\nprofile: ${file} (open it in Chrome DevTools or speedscope)`)
}

await profileOnce(process.argv[2] ?? "replay")
