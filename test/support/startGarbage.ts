/**
 * Run as its own process by test/cli/memory.test.ts, with the Node options of `morsel serve`: leaves a heap as a
 * start does (many objects made, a tenth of them kept), collects it as a started server does, and prints the heap
 * V8 keeps against the heap in use, in MiB, as one JSON line.
 */
import { Effect } from "effect"
import { collectStartGarbage } from "../../src/memory.ts"

let made: Array<{ readonly i: number; readonly text: string; readonly pair: ReadonlyArray<number> }> | undefined = []
for (let i = 0; i < 400_000; i++) made.push({ i, text: `food ${i}`, pair: [i, i] })
const kept = made.filter((_, i) => i % 10 === 0)
made = undefined
Effect.runSync(collectStartGarbage)
const { heapTotal, heapUsed } = process.memoryUsage()
process.stdout.write(`${JSON.stringify({ committed: heapTotal / 2 ** 20, used: heapUsed / 2 ** 20, kept: kept.length })}\n`)
