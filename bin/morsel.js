#!/usr/bin/env node
// The bundled command line when the build made one (it starts faster), else the compiled modules.
import { spawn } from "node:child_process"
import { existsSync, realpathSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { SERVE_ENV, SERVE_NODE_OPTIONS, tuned } from "./tuning.js"

// Run by this package's own `npm start` or `npm run sandbox` (not by another project's scripts): the tree is built
// first if a source is newer than the last build.
const samePath = (a, b) => {
  try {
    return realpathSync(a) === realpathSync(b)
  } catch {
    return false
  }
}
const ownScript =
  ["start", "sandbox"].includes(process.env.npm_lifecycle_event ?? "") &&
  process.env.npm_package_json !== undefined &&
  samePath(process.env.npm_package_json, fileURLToPath(new URL("../package.json", import.meta.url)))
if (ownScript && process.env.MORSEL_RESTARTED === undefined) await import("./build-if-stale.js")

// `serve` started without its Node options (npx, node bin/morsel.js, npm start) runs again in a Node process that
// has them, which this one waits for, passing signals on.
if (process.argv[2] === "serve" && !tuned() && process.env.MORSEL_RESTARTED === undefined) {
  const child = spawn(process.execPath, [...process.execArgv, ...SERVE_NODE_OPTIONS, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: ["inherit", "inherit", "inherit", "ipc"],
    env: { ...SERVE_ENV, ...process.env, MORSEL_RESTARTED: "1" }
  })
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal))
  // Ends as the server ended: with its exit code, or by the signal that ended it.
  child.once("exit", (code, signal) => {
    if (signal === null) process.exit(code ?? 1)
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
  })
} else {
  // Started by the waiting process above: a server never outlives it, even when it is killed with SIGKILL.
  if (process.env.MORSEL_RESTARTED !== undefined && process.channel) {
    process.channel.unref()
    process.once("disconnect", () => process.kill(process.pid, "SIGKILL"))
  }
  const bundle = new URL("../dist/bundle/morsel.mjs", import.meta.url)
  await import(existsSync(bundle) ? bundle.href : "../dist/src/cli.js")
}
