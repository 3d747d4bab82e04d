/**
 * The embedded database's socket folder: unix socket paths are short (~100 bytes), so the socket lives in a fresh
 * folder of the temporary directory, named `morsel-pg-…` and marked with its process's id. A stopped server removes
 * it; so does a process that ends without stopping its database (its exit), and a start removes those of processes
 * that were killed (a mark naming a process that is gone, or no mark and untouched for a minute).
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { isAbandoned, lockDataFolder } from "./dataFolderLock.ts"

const PREFIX = "morsel-pg-"
/** A socket folder gets its mark right after it is made: one without a mark this old was left by an earlier version. */
const UNMARKED_MS = 60_000

/** This process's socket folders, removed when it exits if their scope never closed. */
const ours = new Set<string>()

const remove = (folder: string) => {
  ours.delete(folder)
  rmSync(folder, { recursive: true, force: true })
}

let exitHook = false
const removeOursAtExit = () => {
  if (exitHook) return
  exitHook = true
  process.once("exit", () => {
    for (const folder of ours) {
      try {
        remove(folder)
      } catch {
        // exiting anyway
      }
    }
  })
}

/** Removes the socket folders of processes that are gone; another user's, or one gone meanwhile, is passed over. */
const clearAbandoned = (parent: string) => {
  for (const name of readdirSync(parent)) {
    if (!name.startsWith(PREFIX)) continue
    try {
      const left = join(parent, name)
      if (isAbandoned(left, UNMARKED_MS)) rmSync(left, { recursive: true, force: true })
    } catch {
      // not this start's to clear
    }
  }
}

/**
 * A new socket folder for this process, removed when the scope closes (or the process exits); its mark is held with
 * the data folder's kernel lock, so another start (even from another PID namespace) never takes it for abandoned.
 */
export const socketFolder = Effect.gen(function* () {
  const folder = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const parent = tmpdir()
      try {
        clearAbandoned(parent)
      } catch {
        // an unreadable temporary directory still lets us make our own folder (or says why below)
      }
      const made = mkdtempSync(join(parent, PREFIX))
      ours.add(made)
      removeOursAtExit()
      return made
    }),
    (made) => Effect.sync(() => remove(made))
  )
  yield* Effect.orDie(lockDataFolder(folder))
  return folder
})
