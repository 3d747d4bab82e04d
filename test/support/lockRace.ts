/**
 * Run as its own process by test/db/dataFolderLock.test.ts: for each folder `<parent>/<round>`, waits for that
 * round's moment (wall-clock ms, the same in every process, so that several processes try at once) and locks the
 * folder. Every lock taken is held until `until`, when all processes are done. Prints one JSON array: `held`, or
 * `refused` with the refusal's message.
 */
import { join } from "node:path"
import { Effect } from "effect"
import { lockDataFolder } from "../../src/db/dataFolderLock.ts"

const [parent, rounds, at, spacing, until] = process.argv.slice(2)
const race = Effect.gen(function* () {
  const outcomes: Array<string> = []
  for (let round = 0; round < Number(rounds); round++) {
    const moment = Number(at) + round * Number(spacing)
    while (Date.now() < moment) {
      // waiting for the others, to the millisecond
    }
    outcomes.push(
      yield* lockDataFolder(join(parent!, String(round))).pipe(
        Effect.as("held"),
        Effect.catchAll((error) => Effect.succeed(`refused ${error.message}`))
      )
    )
  }
  yield* Effect.sleep(Math.max(0, Number(until) - Date.now()))
  return outcomes
})
process.stdout.write(`${JSON.stringify(await Effect.runPromise(Effect.scoped(race)))}\n`)
