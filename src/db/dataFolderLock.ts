/** One process per embedded data folder: a lock file naming the holder's process, taken before the database opens. */
import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs"
import { join, resolve } from "node:path"
import { Data, Effect } from "effect"

export const LOCK_FILE = "morsel.pid"

export class DataFolderInUse extends Data.TaggedError("DataFolderInUse")<{ readonly message: string }> {}

/** Whether a process of that id is running (one we may not signal is running too). */
const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error instanceof Error && "code" in error && error.code === "EPERM"
  }
}

const holderOf = (path: string): number | undefined => {
  try {
    const pid = Number.parseInt(readFileSync(path, "utf8").trim(), 10)
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

/** Creates the lock file naming this process; false when it exists. */
const create = (path: string): boolean => {
  try {
    const fd = openSync(path, "wx", 0o600)
    try {
      writeSync(fd, `${process.pid}\n`)
    } finally {
      closeSync(fd)
    }
    return true
  } catch (error) {
    if (error instanceof Error && "code" in error && error.code === "EEXIST") return false
    throw error
  }
}

/**
 * Holds `dataDir` for this process until the scope closes. A lock left by a process that is gone (a crash, a
 * killed container whose process id came back as ours) is taken over; one held by a running process stops the start.
 */
export const lockDataFolder = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const folder = resolve(dataDir)
        const path = join(folder, LOCK_FILE)
        for (let attempt = 0; attempt < 2; attempt++) {
          if (create(path)) return path
          const holder = holderOf(path)
          if (holder !== undefined && holder !== process.pid && isRunning(holder)) {
            throw new DataFolderInUse({
              message: `the embedded database in ${folder} is in use by another morsel process (pid ${holder}): stop it, or set MORSEL_DATA_DIR to another folder`
            })
          }
          rmSync(path, { force: true })
        }
        throw new DataFolderInUse({ message: `the embedded database in ${folder} is being opened by another morsel process; try again` })
      },
      catch: (error) =>
        error instanceof DataFolderInUse
          ? error
          : new DataFolderInUse({ message: `cannot lock the embedded database folder ${resolve(dataDir)}: ${String(error)}` })
    }),
    (path) => Effect.sync(() => (holderOf(path) === process.pid ? rmSync(path, { force: true }) : undefined))
  )
