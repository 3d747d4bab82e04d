/** `npm run bench`: runs every benchmark module in turn and prints its figures. */
import { foodsBenchmark } from "./foods.ts"
import { foodsApiBenchmark } from "./foodsApi.ts"

export interface Benchmark {
  readonly name: string
  /** Prints its own figures; throws when it cannot run. */
  readonly run: () => Promise<void>
}

/** Add further benchmarks here (one module each). */
const benchmarks: ReadonlyArray<Benchmark> = [foodsBenchmark, foodsApiBenchmark]

const only = process.argv.slice(2)
let failed = false
for (const benchmark of benchmarks) {
  if (only.length > 0 && !only.includes(benchmark.name)) continue
  console.log(`\n== ${benchmark.name}`)
  try {
    await benchmark.run()
  } catch (error) {
    failed = true
    console.error(`${benchmark.name} failed:`, error)
  }
}
process.exitCode = failed ? 1 : 0
