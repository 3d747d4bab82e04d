/** Where the tests and benchmarks find USDA data: SR28 outside the repository (never copied in), the FDC fixture in test/. */
import { existsSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..")

const hasFiles = (dir: string) => existsSync(join(dir, "FOOD_DES.txt"))

/** `shared/fooddata/sr28` beside this checkout or beside any folder above it. */
const besideAncestors = (from: string): ReadonlyArray<string> => {
  const dirs: Array<string> = []
  for (let dir = from; ; dir = dirname(dir)) {
    dirs.push(join(dirname(dir), "shared/fooddata/sr28"))
    if (dirname(dir) === dir) return dirs
  }
}

/** MORSEL_SR28_DIR when set; else the first `shared/fooddata/sr28` found beside the checkout or its parents, or under /work. */
const candidates = [
  ...(process.env["MORSEL_SR28_DIR"] ? [process.env["MORSEL_SR28_DIR"]] : []),
  ...besideAncestors(repoRoot),
  "/work/shared/fooddata/sr28"
]

export const SR28_DIR = candidates.find(hasFiles) ?? resolve(repoRoot, "../shared/fooddata/sr28")
export const FDC_FIXTURE_DIR = join(repoRoot, "test/fixtures/fdc")

/** The SR28 files are present (they live outside the repository); tests that need them skip with a notice otherwise. */
export const hasSr28 = hasFiles(SR28_DIR)

export const sr28Notice = () => {
  if (!hasSr28) console.warn(`[skipped] USDA SR28 tests: no data at ${SR28_DIR} (set MORSEL_SR28_DIR)`)
}
