#!/usr/bin/env node
// `npm start`'s build step: runs `tsc -b` only when a source is newer than the last build, so an unchanged tree starts at once.
import { spawnSync } from "node:child_process"
import { readdirSync, statSync, utimesSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const buildInfo = join(root, "dist/.tsbuildinfo")
const inputs = ["src", "migrations", "tsconfig.json", "tsconfig.build.json", "package.json"]

/** The latest modification time under a file or folder, in ms. */
const newest = (path) => {
  const stat = statSync(path, { throwIfNoEntry: false })
  if (stat === undefined) return 0
  if (!stat.isDirectory()) return stat.mtimeMs
  let latest = stat.mtimeMs
  for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)))
  return latest
}

const built = statSync(buildInfo, { throwIfNoEntry: false })?.mtimeMs ?? 0
if (inputs.some((input) => newest(join(root, input)) > built)) {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
  const { status } = spawnSync(process.execPath, [tsc, "-b", "tsconfig.build.json"], { cwd: root, stdio: "inherit" })
  if (status !== 0) process.exit(status ?? 1)
  // tsc leaves its build information untouched when nothing needed emitting: mark the tree as checked now.
  const now = new Date()
  utimesSync(buildInfo, now, now)
}
