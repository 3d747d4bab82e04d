// The embedded database's socket folder (`morsel-pg-…` in the temporary directory): a stopped database removes it,
// and a start removes those left by processes that were killed, never one whose process still runs.
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { embedded, layerFor } from "../../src/db/Database.ts"
import { lockDataFolder } from "../../src/db/dataFolderLock.ts"

/** Runs `use` with TMPDIR set to a fresh folder of its own, which is removed after. */
const inOwnTmpdir = <A, E, R>(use: (folder: string) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const before = process.env["TMPDIR"]
      const folder = mkdtempSync(join(tmpdir(), "morsel-socket-"))
      process.env["TMPDIR"] = folder
      return { before, folder }
    }),
    ({ folder }) => use(folder),
    ({ before, folder }) =>
      Effect.sync(() => {
        if (before === undefined) delete process.env["TMPDIR"]
        else process.env["TMPDIR"] = before
        rmSync(folder, { recursive: true, force: true })
      })
  )

const socketFolders = (folder: string) => readdirSync(folder).filter((name) => name.startsWith("morsel-pg-"))

/** The id of a process that has ended. */
const goneProcess = () => spawnSync(process.execPath, ["-e", ""]).pid ?? 0

describe("the embedded database's socket folder", () => {
  it.effect("is there while the database serves and gone once it stopped", () =>
    inOwnTmpdir((folder) =>
      Effect.gen(function* () {
        yield* Effect.scoped(
          Effect.gen(function* () {
            const target = yield* embedded("memory://")
            const context = yield* Layer.build(layerFor(target))
            const [row] = yield* Effect.provide(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ one: number }>`SELECT 1 AS one`), context)
            expect(row?.one).toBe(1)
            expect(socketFolders(folder)).toEqual([join(target.host ?? "").split("/").pop()])
            expect(readdirSync(target.host ?? "")).toContain(".s.PGSQL.5432")
          })
        )
        expect(readdirSync(folder)).toEqual([])
      })
    ), 120_000)

  it.effect("a start removes the folders of killed processes and keeps those of running ones", () =>
    inOwnTmpdir((folder) =>
      Effect.scoped(Effect.gen(function* () {
        const mark = (name: string, pid: number) => {
          mkdirSync(join(folder, name))
          writeFileSync(join(folder, name, "morsel.pid"), `${pid}\n`)
        }
        mark("morsel-pg-killed", goneProcess())
        // A running process's folder: its mark held with the kernel lock, as a start holds it.
        mkdirSync(join(folder, "morsel-pg-running"))
        yield* lockDataFolder(join(folder, "morsel-pg-running"))
        // An unmarked one, as earlier versions left them: removed once it is a minute old, not before.
        mkdirSync(join(folder, "morsel-pg-old"))
        utimesSync(join(folder, "morsel-pg-old"), new Date(Date.now() - 120_000), new Date(Date.now() - 120_000))
        mkdirSync(join(folder, "morsel-pg-new"))
        mkdirSync(join(folder, "unrelated"))
        yield* Effect.scoped(embedded("memory://"))
        expect(readdirSync(folder).sort()).toEqual(["morsel-pg-new", "morsel-pg-running", "unrelated"])
        expect(existsSync(join(folder, "morsel-pg-killed"))).toBe(false)
      }))
    ), 120_000)
})
