// The migrated template every test process clones its in-memory databases from (test/support/database.ts), made once
// for the whole run instead of once per test file, and removed when the run ends.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { makeTemplate, realPostgresUrl, TEMPLATE_FILE } from "./database.ts"

export default async function setup() {
  // Each project runs this; the first one makes the file and the others share it. On a real server there is none.
  if (process.env[TEMPLATE_FILE] !== undefined || realPostgresUrl !== undefined) return
  const blob = await Effect.runPromise(makeTemplate)
  const folder = mkdtempSync(join(tmpdir(), "morsel-template-"))
  const file = join(folder, "pgdata.tar")
  writeFileSync(file, new Uint8Array(await blob.arrayBuffer()))
  process.env[TEMPLATE_FILE] = file
  return () => rmSync(folder, { recursive: true, force: true })
}
