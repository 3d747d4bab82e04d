#!/usr/bin/env node
// The bundled command line when the build made one (it starts faster), else the compiled modules.
import { spawn } from "node:child_process"
import { existsSync, readFileSync, realpathSync } from "node:fs"
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

/** Whether a process of that id is running (one we may not signal is running too). */
const isRunning = (pid) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error.code === "EPERM"
  }
}

/** The parent of process `pid`, from /proc (Linux); undefined elsewhere. */
const parentOf = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const ppid = Number.parseInt(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1] ?? "", 10)
    return Number.isSafeInteger(ppid) && ppid > 1 ? ppid : undefined
  } catch {
    return undefined
  }
}

const SHELLS = new Set(["sh", "dash", "bash", "zsh", "ash", "busybox"])

/**
 * Under npm (`npm start`, `npm run sandbox`, npx, another project's script) the processes whose end ends the server:
 * npm, and the shell npm ran the script in when that is this process's parent (the shell outlives npm killed with
 * SIGKILL). Started otherwise, the command is this process itself: the server is its child and ends with it.
 */
const startedBy = () => {
  const parent = process.ppid
  if (process.env.npm_lifecycle_event === undefined || parent <= 1) return []
  let shell = ""
  try {
    shell = readFileSync(`/proc/${parent}/comm`, "utf8").trim()
  } catch {
    // not Linux: the parent alone
  }
  const npm = SHELLS.has(shell) ? parentOf(parent) : undefined
  return npm === undefined ? [parent] : [parent, npm]
}

// `serve` started without its Node options (npx, node bin/morsel.js, npm start) runs again in a Node process that
// has them, which this one waits for, passing signals on. A server never outlives the command that started it: when
// that command is gone (killed with SIGTERM or SIGKILL), the server is stopped as by SIGTERM.
if (process.argv[2] === "serve" && !tuned() && process.env.MORSEL_RESTARTED === undefined) {
  const child = spawn(process.execPath, [...process.execArgv, ...SERVE_NODE_OPTIONS, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: ["inherit", "inherit", "inherit", "ipc"],
    env: { ...SERVE_ENV, ...process.env, MORSEL_RESTARTED: "1" }
  })
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal))
  const starter = startedBy()
  const watch = setInterval(() => {
    if (starter.every(isRunning) && process.ppid === starter[0]) return
    clearInterval(watch)
    child.kill("SIGTERM")
  }, 500)
  if (starter.length === 0) clearInterval(watch)
  // Ends as the server ended: with its exit code, or by the signal that ended it.
  child.once("exit", (code, signal) => {
    clearInterval(watch)
    if (signal === null) process.exit(code ?? 1)
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
  })
} else {
  // Started by the waiting process above: a server never outlives it, even when it is killed with SIGKILL. It stops
  // as by SIGTERM (its requests answered, its database closed and its socket folder removed), within 30 s at most.
  if (process.env.MORSEL_RESTARTED !== undefined && process.channel) {
    process.channel.unref()
    process.once("disconnect", () => {
      setTimeout(() => process.kill(process.pid, "SIGKILL"), 30_000).unref()
      process.kill(process.pid, "SIGTERM")
    })
  }
  // A server takes the first SIGTERM or SIGINT as the order to stop (the command's runtime interrupts it) and then
  // finishes stopping — requests answered, database closed, its folders removed — when the signal comes again: from
  // the waiting process above, the whole process group or a service manager. Without a listener here a repeated
  // signal would end it half-way. A signal that comes while the command is still loading (nothing else listens yet)
  // ends the process as it would without this listener; SIGKILL (a service manager's stop timeout) ends it at once.
  if (process.argv[2] === "serve") {
    let stopping = false
    const onSignal = (signal) => {
      if (stopping) return
      stopping = true
      if (process.listenerCount(signal) === 1) process.exit(signal === "SIGINT" ? 130 : 143)
    }
    for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, onSignal)
  }
  const bundle = new URL("../dist/bundle/morsel.mjs", import.meta.url)
  await import(existsSync(bundle) ? bundle.href : "../dist/src/cli.js")
}
