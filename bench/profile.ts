/**
 * `npx tsx bench/profile.ts <scenario> [seconds]`: runs the benchmark's morsel under the sampling profiler, loads it
 * with one scenario (replay, challenge, health, analyze, matcher, search, nutrition, nutrition-text) twice and prints where the CPU of the second,
 * warm pass went: the functions with the most self time and the packages they belong to. The profile itself stays
 * in bench/results/profiles/.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Call, type Child, load, send, sequential, startRole } from "./service/load.ts"
import { analyzeCall, morselEnv, nutritionCall, photos, roles } from "./service/roles.ts"

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

const scenarios = async (): Promise<Record<string, (morsel: Child) => Promise<unknown>>> => {
  const { large, small } = await photos()
  const run = `profile-${Date.now().toString(36)}`
  let passes = 0
  const steady = (call: Call) => (morsel: Child) => load(morsel.port, morsel.pid, call, { connections: 8, seconds, maxRequests: 1_000_000 })
  const replay = analyzeCall(small, `${run}-replay`)
  return {
    replay: async (morsel) => {
      await send(morsel.port, replay)
      return steady(replay)(morsel)
    },
    challenge: steady({ ...replay, headers: { "idempotency-key": `${run}-unpaid` } }),
    health: steady({ method: "GET", path: "/health" }),
    // New analyses need new keys in each pass: a key already answered is only replayed.
    analyze: ({ port }) => sequential(port, Math.max(4, Math.round(seconds * 5)), (i) => analyzeCall(large, `${run}-big-${++passes}-${i}`)),
    matcher: ({ port }) => sequential(port, Math.max(10, Math.round(seconds * 20)), (i) => analyzeCall(small, `${run}-twenty-${++passes}-${i}`, "lt")),
    // The free food paths: a search, and nutrition for twenty items half by text, half by id.
    search: steady({ method: "GET", path: "/v1/foods?q=chicken%20breast" }),
    nutrition: steady(nutritionCall(20)),
    "nutrition-text": steady(nutritionCall(20, true))
  }
}

const seconds = Number(process.argv[3] ?? "5")

const profileOnce = async (scenario: string) => {
  const all = await scenarios()
  const drive = all[scenario]
  if (drive === undefined) throw new Error(`unknown scenario ${scenario}; one of ${Object.keys(all).join(", ")}`)
  const profiles = join(root, "bench/results/profiles")
  mkdirSync(profiles, { recursive: true })
  const file = join(profiles, `${scenario}-${new Date().toISOString().replace(/[:.]/g, "-")}.cpuprofile`)
  const dir = mkdtempSync(join(tmpdir(), "morsel-profile-"))
  const morsel = await startRole("serve", { ...morselEnv(dir), PROFILE_FILE: file }, { script: fileURLToPath(import.meta.url) })
  try {
    // A first pass warms the code up; only the second is profiled.
    await drive(morsel)
    morsel.process.kill("SIGUSR2")
    await new Promise((resolve) => setTimeout(resolve, 100))
    console.log(JSON.stringify(await drive(morsel)).slice(0, 300))
  } finally {
    await morsel.stop("SIGINT")
    rmSync(dir, { recursive: true, force: true })
  }
  summarise(JSON.parse(readFileSync(file, "utf8")) as Profile, Number(process.env["TOP"] ?? "40"))
  console.log(`\nprofile: ${file} (open it in Chrome DevTools or speedscope)`)
}

/** The profiled server: SIGUSR2 starts the sampling profiler (after the warm-up), SIGINT writes the profile and exits. */
const serve = async () => {
  const session = new Session()
  session.connect()
  await session.post("Profiler.enable")
  await session.post("Profiler.setSamplingInterval", { interval: 200 })
  process.on("SIGUSR2", () => void session.post("Profiler.start"))
  process.once("SIGINT", async () => {
    const { profile } = await session.post("Profiler.stop")
    writeFileSync(process.env["PROFILE_FILE"] ?? "morsel.cpuprofile", JSON.stringify(profile))
    process.exit(0)
  })
  await roles.morsel()
}

if (process.argv[2] === "serve") {
  await serve()
} else {
  await profileOnce(process.argv[2] ?? "replay")
}
