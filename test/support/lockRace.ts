/**
 * Run as its own process by test/db/dataFolderLock.test.ts, in one of two ways. It prints `ready` once loaded, then
 * reads one line from its standard input: the wall-clock millisecond to start at, the same for every process.
 *
 * `together <parent> <rounds> <spacing>`: for each folder `<parent>/<round>`, waits for that round's moment (so that
 * several processes try at once) and a random few hundred microseconds more, and locks the folder. Prints one JSON
 * array, `held`, or `refused` with the refusal's message, and holds every lock it took until its input closes.
 *
 * `churn <parent> <folders> <ms>`: for `ms`, locks a folder `<parent>/<n>` picked at random, and while it holds it,
 * creates `<folder>/holder` exclusively (its pid in it), waits a random while, removes it and releases the folder;
 * random waits between. A second holder finds `holder` there. Prints `{ held, refused, overlaps }`.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { Effect } from "effect"
import { lockDataFolder } from "../../src/db/dataFolderLock.ts"

const [mode, parent, ...rest] = process.argv.slice(2)

/** A random wait: spinning (this process keeps its core) or sleeping (it gives it away), up to `maxMs`. */
const jitter = (maxMs: number) =>
  Effect.suspend(() => {
    const ms = Math.random() * maxMs
    if (Math.random() < 0.5) return Effect.sleep(ms)
    const until = performance.now() + ms
    while (performance.now() < until) {
      // spinning
    }
    return Effect.void
  })

const together = (at: number, [rounds, spacing]: Array<string>) =>
  Effect.gen(function* () {
    const outcomes: Array<string> = []
    for (let round = 0; round < Number(rounds); round++) {
      const moment = Number(at) + round * Number(spacing)
      while (Date.now() < moment) {
        // waiting for the others, to the millisecond
      }
      yield* jitter(0.5)
      outcomes.push(
        yield* lockDataFolder(join(parent!, String(round))).pipe(
          Effect.as("held"),
          Effect.catchAll((error) => Effect.succeed(`refused ${error.message}`))
        )
      )
    }
    process.stdout.write(`${JSON.stringify(outcomes)}\n`)
    yield* Effect.promise(() => new Promise((resolve) => process.stdin.once("end", resolve).resume()))
  })

const churn = (from: number, [folders, ms]: Array<string>) =>
  Effect.gen(function* () {
    const until = from + Number(ms)
    yield* Effect.sleep(Math.max(0, from - Date.now()))
    const tally = { held: 0, refused: 0, overlaps: [] as Array<string> }
    while (Date.now() < until) {
      const folder = join(parent!, String(Math.floor(Math.random() * Number(folders))))
      const outcome = yield* Effect.scoped(
        lockDataFolder(folder).pipe(
          Effect.zipRight(
            Effect.gen(function* () {
              const marker = join(folder, "holder")
              try {
                writeFileSync(marker, String(process.pid), { flag: "wx" })
              } catch {
                tally.overlaps.push(`${folder}: ${process.pid} and ${existsSync(marker) ? readFileSync(marker, "utf8") : "?"}`)
                return "held"
              }
              yield* jitter(3)
              rmSync(marker)
              return "held"
            })
          ),
          Effect.catchAll(() => Effect.succeed("refused"))
        )
      )
      if (outcome === "held") tally.held++
      else tally.refused++
      yield* jitter(2)
    }
    process.stdout.write(`${JSON.stringify(tally)}\n`)
  })

process.stdout.write("ready\n")
const lines = createInterface({ input: process.stdin })
const at = Number(await new Promise<string>((resolve) => lines.once("line", resolve)))
lines.close()
await Effect.runPromise(Effect.scoped(mode === "churn" ? churn(at, rest) : together(at, rest)))
