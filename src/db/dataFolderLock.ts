/** One process per embedded data folder: a lock file naming the holder's process, taken before the database opens. */
import { closeSync, existsSync, linkSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs"
import { join, resolve } from "node:path"
import { Data, Effect, Schedule } from "effect"

export const LOCK_FILE = "morsel.pid"
/** Held by the one process that may remove a lock left by a process that is gone. */
const TAKEOVER_FILE = `${LOCK_FILE}.takeover`

export class DataFolderInUse extends Data.TaggedError("DataFolderInUse")<{ readonly message: string }> {}

/** Another process is taking the folder over right now: its outcome decides this start. */
class Contended extends Data.TaggedError("Contended") {}

const hasCode = (error: unknown, code: string) => error instanceof Error && "code" in error && error.code === code

/** Whether a process of that id is running (one we may not signal is running too). */
const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return hasCode(error, "EPERM")
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

/** A holder that is neither gone nor this process (a killed container's process id can come back as ours). */
const isLive = (holder: number | undefined): holder is number => holder !== undefined && holder !== process.pid && isRunning(holder)

/**
 * Creates `path` naming this process; false when it exists. The file is written aside and linked into place, so
 * that nobody ever reads it empty; where the file system has no links, it is created and then written.
 */
const create = (path: string): boolean => {
  const aside = `${path}.${process.pid}`
  try {
    writeFileSync(aside, `${process.pid}\n`, { mode: 0o600 })
    linkSync(aside, path)
    return true
  } catch (error) {
    if (hasCode(error, "EEXIST")) return false
    if (!hasCode(error, "EPERM") && !hasCode(error, "ENOTSUP") && !hasCode(error, "EOPNOTSUPP")) throw error
  } finally {
    rmSync(aside, { force: true })
  }
  try {
    const fd = openSync(path, "wx", 0o600)
    try {
      writeSync(fd, `${process.pid}\n`)
    } finally {
      closeSync(fd)
    }
    return true
  } catch (error) {
    if (hasCode(error, "EEXIST")) return false
    throw error
  }
}

/**
 * One attempt at the folder's lock. A lock held by a running process stops the start. One left by a process that
 * is gone is removed only by the process holding the takeover file, after it read the same holder again: two
 * servers starting together on a crashed server's folder can never both hold it, as they could when each removed
 * what it had found stale (the other's new lock among them).
 */
const attempt = (folder: string) =>
  Effect.try({
    try: (): string => {
      const path = join(folder, LOCK_FILE)
      if (create(path)) return path
      const stale = holderOf(path)
      if (isLive(stale)) {
        throw new DataFolderInUse({
          message: `the embedded database in ${folder} is in use by another morsel process (pid ${stale}): stop it, or set MORSEL_DATA_DIR to another folder`
        })
      }
      const takeover = join(folder, TAKEOVER_FILE)
      if (!create(takeover)) {
        // A takeover left by a process that died in it is cleared for the next attempt.
        if (!isLive(holderOf(takeover))) rmSync(takeover, { force: true })
        throw new Contended()
      }
      try {
        if (holderOf(path) === stale) rmSync(path, { force: true })
        if (create(path)) return path
        throw new Contended()
      } finally {
        rmSync(takeover, { force: true })
      }
    },
    catch: (error) =>
      error instanceof DataFolderInUse || error instanceof Contended
        ? error
        : new DataFolderInUse({ message: `cannot lock the embedded database folder ${folder}: ${String(error)}` })
  })

/**
 * Holds `dataDir` for this process until the scope closes. A lock left by a process that is gone (a crash, a
 * killed container whose process id came back as ours) is taken over; one held by a running process stops the
 * start. While another process takes the folder over, the start waits up to 2 s for its outcome.
 */
export const lockDataFolder = (dataDir: string) => {
  const folder = resolve(dataDir)
  return Effect.acquireRelease(
    attempt(folder).pipe(
      Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 100, while: (error) => error._tag === "Contended" }),
      Effect.catchTag("Contended", () =>
        Effect.fail(new DataFolderInUse({ message: `the embedded database in ${folder} is being opened by another morsel process; try again` }))
      )
    ),
    (path) => Effect.sync(() => (holderOf(path) === process.pid ? rmSync(path, { force: true }) : undefined))
  )
}

/**
 * Whether `folder` was left by a process that is gone: its lock names a process no longer running, or it has no lock
 * and has not changed for `unlockedAfterMs` (its process died before taking it).
 */
export const isAbandoned = (folder: string, unlockedAfterMs: number): boolean => {
  const path = join(folder, LOCK_FILE)
  if (existsSync(path)) {
    const holder = holderOf(path)
    return holder !== undefined && holder !== process.pid && !isRunning(holder)
  }
  try {
    return Date.now() - statSync(folder).mtimeMs > unlockedAfterMs
  } catch {
    return false
  }
}
