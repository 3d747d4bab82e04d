/** Where the tests and benchmarks find USDA data: SR28 beside the repository (never copied in), the FDC fixture in test/. */
import { existsSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..")

export const SR28_DIR = resolve(repoRoot, "../shared/fooddata/sr28")
export const FDC_FIXTURE_DIR = join(repoRoot, "test/fixtures/fdc")

/** The SR28 files are present (they live outside the repository); tests that need them skip with a notice otherwise. */
export const hasSr28 = existsSync(join(SR28_DIR, "FOOD_DES.txt"))

export const sr28Notice = () => {
  if (!hasSr28) console.warn(`[skipped] USDA SR28 tests: no data at ${SR28_DIR}`)
}
