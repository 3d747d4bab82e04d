/**
 * Loaded with `--import` into the profiled server (`bench/profile.ts`): the first SIGUSR2 starts V8's sampling
 * profiler, the second stops it and writes the profile to $PROFILE_FILE. Any other process that loads it (npm) only
 * listens.
 */
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"

const session = new Session()
session.connect()
let running = false
process.on("SIGUSR2", async () => {
  if (!running) {
    running = true
    await session.post("Profiler.enable")
    await session.post("Profiler.setSamplingInterval", { interval: 200 })
    await session.post("Profiler.start")
    return
  }
  running = false
  const { profile } = await session.post("Profiler.stop")
  writeFileSync(process.env.PROFILE_FILE ?? "morsel.cpuprofile", JSON.stringify(profile))
})
