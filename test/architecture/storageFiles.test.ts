/** The PostgreSQL pass runs the test files whose database the test database setting chooses, found through their imports. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { storageTestFiles } from "../support/storageFiles.ts"

const root = dirname(dirname(dirname(fileURLToPath(import.meta.url))))
// The setting's name, spelt so that this file does not itself read as one that reads it.
const SETTING = ["TEST", "DATABASE", "URL"].join("_")

describe("the files of the PostgreSQL pass", () => {
  it("are those that read the setting or import, at any depth, a module of the suite that does", () => {
    const tree = mkdtempSync(join(tmpdir(), "storage-files-"))
    try {
      const write = (path: string, text: string) => {
        mkdirSync(dirname(join(tree, path)), { recursive: true })
        writeFileSync(join(tree, path), text)
      }
      write("test/helpers/db.ts", `export const url = process.env["${SETTING}"]\n`)
      write("test/helpers/serve.ts", 'import { url } from "./db.ts"\nexport const start = () => url\n')
      write("test/helpers/pictures.ts", "export const photo = 1\n")
      write("test/a/direct.test.ts", 'import { url } from "../helpers/db.ts"\n')
      write("test/a/deep.test.ts", 'import { start } from "../helpers/serve.ts"\n')
      write("test/a/dynamic.test.ts", 'const server = await import("../helpers/serve.ts")\n')
      write("test/a/reads.test.ts", `const url = process.env["${SETTING}"]\n`)
      write("test/b/none.test.ts", 'import { photo } from "../helpers/pictures.ts"\nimport { describe } from "vitest"\n')
      write("test/b/product.test.ts", 'import { layerFor } from "../../src/db/Database.ts"\n')
      expect(storageTestFiles(tree)).toEqual(["test/a/deep.test.ts", "test/a/direct.test.ts", "test/a/dynamic.test.ts", "test/a/reads.test.ts"])
    } finally {
      rmSync(tree, { recursive: true, force: true })
    }
  })

  it("on this suite: the ledger's and the faults' files run again, the matcher's and the embedded folders' do not", () => {
    const files = storageTestFiles(root)
    expect(files).toEqual(expect.arrayContaining(["test/credits/ledger.test.ts", "test/faults/crashes.test.ts", "test/x402/concurrency.test.ts", "test/foods/wordsHttp.test.ts"]))
    for (const file of ["test/foods/matcher.test.ts", "test/db/embedded.test.ts", "test/client/client.test.ts", "test/architecture/storageFiles.test.ts"]) expect(files).not.toContain(file)
  })
})
