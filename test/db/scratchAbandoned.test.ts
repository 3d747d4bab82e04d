// A running process's folder is never judged abandoned by one that cannot see its process (another PID namespace
// sharing the temporary directory): the judgement is the kernel's lock, not the process id written in the file.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Scope } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { isAbandoned, LOCK_FILE, lockDataFolder } from "../../src/db/dataFolderLock.ts"

describe("a locked folder seen from another PID namespace", () => {
  const parent = mkdtempSync(join(tmpdir(), "morsel-abandoned-"))
  afterAll(() => rmSync(parent, { recursive: true, force: true }))

  it("is in use while its holder runs, though the process id in its lock names no process here", async () => {
    const folder = mkdtempSync(join(parent, "morsel-memory-"))
    const scope = Effect.runSync(Scope.make())
    await Effect.runPromise(Scope.extend(lockDataFolder(folder), scope))
    // What another PID namespace reads: an id no process of this one holds (the former check removed the folder).
    writeFileSync(join(folder, LOCK_FILE), "2147483646\n")
    expect(isAbandoned(folder, 0)).toBe(false)
    await Effect.runPromise(Scope.close(scope, Exit.void))
    // Released on a clean stop: no lock, and an unlocked folder is judged by its age only.
    expect(isAbandoned(folder, 60_000)).toBe(false)
  })
})
