// The suite's temporary directory: every run (and every process it starts that inherits its environment) gets a
// fresh TMPDIR, which must be empty when the run ends. A test, a server it started or the product itself that leaves
// a file or folder behind fails the run, naming what was left; the folder is removed either way.
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const OURS = "MORSEL_TEST_TMPDIR"

export default function setup() {
  // Each project runs this; the first one makes the folder and the others share it.
  if (process.env[OURS] !== undefined) return
  const folder = mkdtempSync(join(tmpdir(), "morsel-test-"))
  process.env[OURS] = folder
  process.env["TMPDIR"] = folder
  return () => {
    // tsx-<uid> is the compile cache of tsx, the TypeScript loader the tests start the CLI with: the runner's, not ours.
    const left = readdirSync(folder).filter((name) => !/^tsx-\d+$/.test(name))
    rmSync(folder, { recursive: true, force: true })
    if (left.length > 0) throw new Error(`the tests left ${left.length} entries in the temporary directory: ${left.sort().join(", ")}`)
  }
}
