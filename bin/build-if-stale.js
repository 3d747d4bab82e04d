#!/usr/bin/env node
// The build step of `npm start` and `npm run sandbox` (imported by bin/morsel.js) and of `npm install` (the prepare
// script): compiles, bundles and writes the new database's archive only when a source is newer than the last build, so
// an unchanged tree starts at once, and `npx morsel` (which prepares this folder again before it runs the command)
// neither waits for a build nor rewrites the files a running server or test reads. `npm run build` builds everything.
import { spawnSync } from "node:child_process"
import { readdirSync, statSync, utimesSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const buildInfo = "dist/.tsbuildinfo"
const bundle = "dist/bundle/morsel.mjs"
const archive = "dist/new-database.tar"
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

/** A build output's modification time in ms, 0 when it is missing. */
const modified = (file) => statSync(join(root, file), { throwIfNoEntry: false })?.mtimeMs ?? 0
const latestInput = Math.max(...inputs.map((input) => newest(join(root, input))))

/** Runs a Node.js script in the project folder; a failure ends this one with its status. */
const run = (script, ...args) => {
  const { status } = spawnSync(process.execPath, [script, ...args], { cwd: root, stdio: "inherit" })
  if (status !== 0) process.exit(status ?? 1)
}

if (latestInput > modified(buildInfo)) {
  run(createRequire(import.meta.url).resolve("typescript/bin/tsc"), "-b", "tsconfig.build.json")
  // tsc leaves its build information untouched when nothing needed emitting: mark the tree as checked now.
  const now = new Date()
  utimesSync(join(root, buildInfo), now, now)
}
if (latestInput > modified(bundle)) run(join(root, "bin/bundle.js"))
if (latestInput > modified(archive)) run(join(root, "bin/new-database.js"))
