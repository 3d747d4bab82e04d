/**
 * One process per embedded data folder, held by a lock the kernel keeps for the process and drops when it dies:
 * an exclusive open-file-description lock (fcntl F_OFD_SETLK) on `morsel.pid`, taken before the database opens.
 */
import { closeSync, fstatSync, linkSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from "node:fs"
import { randomUUID } from "node:crypto"
import { createRequire } from "node:module"
import { join, resolve } from "node:path"
import { Data, Effect, Schedule } from "effect"

export const LOCK_FILE = "morsel.pid"

export class DataFolderInUse extends Data.TaggedError("DataFolderInUse")<{ readonly message: string }> {}

/** Another process is taking over a lock left by a process that is gone: its outcome decides this start. */
class Contended extends Data.TaggedError("Contended") {}

interface FileLocks {
  /** Locks `length` bytes of the file from `offset` (exclusive unless `shared`); false when another holds them. */
  readonly tryLock: (fd: number, offset: number, length: number, options?: { readonly shared?: boolean }) => boolean
}

/** Loaded when first used: the command's other work does not load its native module. */
let locks: FileLocks | undefined
const fileLocks = (): FileLocks => {
  locks ??= createRequire(import.meta.url)("fs-native-extensions") as FileLocks
  return locks
}

/**
 * Byte 0 of a lock file is held (exclusively) by the process that wrote it, for its whole life: a process that can
 * lock it shared knows that process is gone. Byte 1 is held by the one process replacing a file whose writer is gone.
 */
const HOLDER = 0
const TAKEOVER = 1

const hasCode = (error: unknown, code: string) => error instanceof Error && "code" in error && error.code === code

const sameFile = (fd: number, path: string) => {
  try {
    const [held, named] = [fstatSync(fd), statSync(path)]
    return held.ino === named.ino && held.dev === named.dev
  } catch (error) {
    if (hasCode(error, "ENOENT")) return false
    throw error
  }
}

/** Whether the process that wrote the lock file open at `fd` still holds it (a lock the kernel dropped when it died). */
const isHeld = (fd: number) => {
  const { tryLock } = fileLocks()
  return !tryLock(fd, HOLDER, 1, { shared: true })
}

const holderOf = (fd: number) => {
  const pid = Number.parseInt(readFileSync(fd, "utf8").trim(), 10)
  return Number.isSafeInteger(pid) && pid > 0 ? String(pid) : "unknown"
}

/**
 * A lock file of this process, not yet in place: its process id written and its byte 0 held, so that the moment
 * it appears at `morsel.pid` it is held and names its holder.
 */
const ownFile = (path: string) => {
  // Named apart from every other process's, those of another PID namespace sharing the folder too.
  const aside = `${path}.${randomUUID()}`
  const fd = openSync(aside, "wx+", 0o600)
  try {
    writeSync(fd, `${process.pid}\n`)
    if (!fileLocks().tryLock(fd, HOLDER, 1)) throw new Error(`cannot lock ${aside}`)
    return { aside, fd }
  } catch (error) {
    closeSync(fd)
    rmSync(aside, { force: true })
    throw error
  }
}

/**
 * One attempt at the folder's lock with this process's `own` file. Where there is no lock file, it is linked into
 * place (atomically: only one process creates it). A lock file whose writer still holds it stops the start, naming
 * that process. One whose writer is gone is replaced (renamed over, atomically) by the one process holding its byte
 * 1, after checking that it is still the file in place: only the holder of the file in place ever replaces or
 * removes it, so two processes never both hold the folder, whatever the order of their steps.
 */
const attempt = (folder: string, own: { readonly aside: string; readonly fd: number }) =>
  Effect.try({
    try: (): void => {
      const path = join(folder, LOCK_FILE)
      try {
        linkSync(own.aside, path)
        return
      } catch (error) {
        if (!hasCode(error, "EEXIST")) throw error
      }
      let fd: number
      try {
        fd = openSync(path, "r+")
      } catch (error) {
        if (hasCode(error, "ENOENT")) throw new Contended() // removed by its holder meanwhile: try again
        throw error
      }
      try {
        if (isHeld(fd)) {
          throw new DataFolderInUse({
            message: `the embedded database in ${folder} is in use by another morsel process (pid ${holderOf(fd)}): stop it, or set MORSEL_DATA_DIR to another folder`
          })
        }
        if (!fileLocks().tryLock(fd, TAKEOVER, 1) || !sameFile(fd, path)) throw new Contended()
        renameSync(own.aside, path)
      } finally {
        closeSync(fd)
      }
    },
    catch: (error) =>
      error instanceof DataFolderInUse || error instanceof Contended
        ? error
        : new DataFolderInUse({ message: `cannot lock the embedded database folder ${folder}: ${String(error)}` })
  })

/** Removes the lock file while still holding it (so nobody takes a file about to go), then lets it go. */
const release = (path: string, fd: number) =>
  Effect.sync(() => {
    try {
      if (sameFile(fd, path)) rmSync(path, { force: true })
    } finally {
      closeSync(fd)
    }
  })

/**
 * Holds `dataDir` for this process until the scope closes. The kernel drops the lock when the process dies (a
 * crash, a killed container), so a folder left that way is taken over by the next start; a folder held by a running
 * process stops the start. While another process takes the folder over, the start waits up to 2 s for its outcome.
 */
export const lockDataFolder = (dataDir: string) => {
  const folder = resolve(dataDir)
  const path = join(folder, LOCK_FILE)
  const taken = Effect.acquireUseRelease(
    Effect.try({
      try: () => ownFile(path),
      catch: (error) => new DataFolderInUse({ message: `cannot lock the embedded database folder ${folder}: ${String(error)}` })
    }),
    (own) =>
      attempt(folder, own).pipe(
        Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 100, while: (error) => error._tag === "Contended" }),
        Effect.catchTag("Contended", () =>
          Effect.fail(new DataFolderInUse({ message: `the embedded database in ${folder} is being opened by another morsel process; try again` }))
        ),
        Effect.as(own.fd)
      ),
    // The file is in place under its own name now, or it was never placed: the aside name goes either way, and the
    // descriptor too when the folder was not taken.
    (own, exit) =>
      Effect.sync(() => {
        rmSync(own.aside, { force: true })
        if (exit._tag === "Failure") closeSync(own.fd)
      })
  )
  return Effect.acquireRelease(taken, (fd) => release(path, fd))
}

/**
 * Whether `folder` was left by a process that is gone: the process that wrote its lock no longer holds it (the
 * kernel's answer, the same from another PID namespace sharing the file system), or it has no lock and has not
 * changed for `unlockedAfterMs` (its process died before taking it).
 */
export const isAbandoned = (folder: string, unlockedAfterMs: number): boolean => {
  let fd: number
  try {
    fd = openSync(join(folder, LOCK_FILE), "r")
  } catch (error) {
    if (!hasCode(error, "ENOENT")) return false
    try {
      return Date.now() - statSync(folder).mtimeMs > unlockedAfterMs
    } catch {
      return false
    }
  }
  try {
    return !isHeld(fd)
  } finally {
    closeSync(fd)
  }
}
