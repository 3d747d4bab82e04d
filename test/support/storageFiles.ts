/**
 * The test files whose database TEST_DATABASE_URL chooses: those that read it, or import (through the suite's own
 * modules) one that does, such as test/support/database.ts. The PostgreSQL pass runs only these; every other file
 * brings its own embedded database or none and would run the same twice.
 */
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const sources = (folder: string): Array<string> =>
  readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name)
    if (entry.isDirectory()) return sources(path)
    return /\.(ts|js)$/.test(entry.name) ? [path] : []
  })

const relativeImports = (file: string, text: string) =>
  [...text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => resolve(dirname(file), m[1] ?? ""))

/** Code that reads the setting from the environment (a file that only names it, in a message, does not). */
const READS = /env(?:\.TEST_DATABASE_URL\b|\[\s*["'`]TEST_DATABASE_URL["'`]\s*\])/

/** Every `*.test.ts` under `testFolder` (relative to `root`) that reaches TEST_DATABASE_URL. */
export const storageTestFiles = (root: string, testFolder = "test"): Array<string> => {
  const files = sources(resolve(root, testFolder)).map((file) => {
    const text = readFileSync(file, "utf8")
    return { file, reads: READS.test(text), imports: relativeImports(file, text) }
  })
  const reaching = new Set(files.filter((f) => f.reads).map((f) => f.file))
  // Grow the set by every file importing one in it, until nothing more joins.
  for (let grew = true; grew; ) {
    grew = false
    for (const f of files) {
      if (!reaching.has(f.file) && f.imports.some((next) => reaching.has(next))) {
        reaching.add(f.file)
        grew = true
      }
    }
  }
  return [...reaching]
    .filter((file) => file.endsWith(".test.ts"))
    .map((file) => relative(root, file))
    .sort()
}
