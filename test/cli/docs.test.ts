// Every shell block of docs/: each parses (`bash -n`), and each one that is not marked runs as written against a
// fresh sandbox, page by page in order (a page's blocks share their shell, as a reader's terminal does), in a folder
// holding a photo `lunch.jpg` (once one of about 120 KB, once a phone's 4032 × 3024 photo of 5.7 MB turned by EXIF)
// and morsel installed as `npm install ../morsel` installs it, with `KEY` a credit key that has credits. curl there fails on an
// HTTP error, so a block whose request the server refuses fails too. A block that needs live accounts or
// machine setup is marked on the line before it, `<!-- live -->` or `<!-- parsed only: why -->`, and is only parsed.
// Also: every relative link of docs/ names a file that exists (and a heading of it, for `#…`).
import { randomUUID } from "node:crypto"
import { execFile } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { promisify } from "node:util"
import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newCreditKey } from "../../src/credits/keys.ts"
import { send } from "../support/http.ts"
import { phonePhoto } from "../support/phonePhoto.ts"
import { root, type Served, serveProcess } from "../support/process.ts"

interface ShellBlock {
  readonly page: string
  readonly line: number
  readonly text: string
  readonly marked: boolean
}

const docs = join(root, "docs")
const pages = readdirSync(docs).filter((name) => name.endsWith(".md")).sort()
const MARK = /^<!-- (live|parsed only: [^>]+) -->$/

const shellBlocks = (page: string): Array<ShellBlock> => {
  const lines = readFileSync(join(docs, page), "utf8").split("\n")
  const blocks: Array<ShellBlock> = []
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(\w*)\s*$/.exec(lines[i] ?? "")
    if (fence === null) continue
    const end = lines.findIndex((line, j) => j > i && line.startsWith("```"))
    if (["sh", "bash", "shell"].includes(fence[1] ?? "")) {
      blocks.push({ page, line: i + 1, text: lines.slice(i + 1, end).join("\n"), marked: MARK.test((lines[i - 1] ?? "").trim()) })
    }
    i = end
  }
  return blocks
}

const bash = (args: ReadonlyArray<string>, options: { cwd?: string; env?: Record<string, string>; input?: string }) =>
  new Promise<{ code: number; output: string }>((done) => {
    const child = execFile("bash", [...args], { cwd: options.cwd ?? root, env: options.env ?? { PATH: process.env["PATH"] ?? "" }, timeout: 120_000, maxBuffer: 16_000_000 }, (error, stdout, stderr) =>
      done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, output: `${stdout}${stderr}` })
    )
    if (options.input !== undefined) child.stdin?.end(options.input)
  })

const all = pages.flatMap(shellBlocks)

describe("the shell blocks of docs/", () => {
  it("there are blocks to run, and every block parses", async () => {
    expect(all.filter((block) => !block.marked).length).toBeGreaterThanOrEqual(5)
    for (const block of all) {
      const parsed = await bash(["-n"], { input: block.text })
      expect(parsed.code, `docs/${block.page}:${block.line} does not parse:\n${parsed.output}`).toBe(0)
    }
  }, 60_000)

  describe("the unmarked ones, run against the sandbox", () => {
    let sandbox: Served
    let key: string
    beforeAll(async () => {
      // The client library the pages use is the built package, as `npm ci` in the clone leaves it.
      await promisify(execFile)(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root })
      sandbox = await serveProcess(["--sandbox"], { MORSEL_DATA_DIR: "memory://" })
      key = newCreditKey(true)
      const checkout = await send(`${sandbox.url}/v1/credits/checkout`, {
        headers: { authorization: `Bearer ${key}` },
        body: { order_id: randomUUID(), context: { channel: "website" } }
      })
      expect(checkout.status).toBe(200)
      const paid = await send(`${sandbox.url}/sandbox/checkout/${(checkout.body as { session_id: string }).session_id}/pay`, { method: "POST" })
      expect(paid.status).toBe(200)
    }, 240_000)
    afterAll(async () => {
      await sandbox?.stop()
    })

    // The photo a reader has: one already small, and one straight from a phone.
    const photos = [
      {
        name: "a photo of about 120 KB",
        make: async (file: string) => {
          // A photo as a phone's, shrunk to fit: well over what a command line holds once in base64.
          await sharp(join(root, "test/fixtures/lunch.jpg")).resize(2000, 1500).jpeg({ quality: 98 }).toFile(file)
          // Its base64 is longer than one argument of a command may be (128 KiB on Linux).
          expect((statSync(file).size * 4) / 3).toBeGreaterThan(131_072)
        }
      },
      {
        name: "a phone photo (4032 × 3024 JPEG, 5–6 MB, EXIF orientation 6)",
        make: async (file: string) => {
          writeFileSync(file, await phonePhoto())
          const seen = await sharp(file).metadata()
          expect([seen.width, seen.height, seen.orientation]).toEqual([4032, 3024, 6])
          expect(statSync(file).size).toBeGreaterThan(5_000_000)
          expect(statSync(file).size).toBeLessThan(6_000_000)
        }
      }
    ]

    for (const photo of photos) {
      describe(`with ${photo.name} as lunch.jpg`, () => {
        let folder: string
        beforeAll(async () => {
          folder = mkdtempSync(join(tmpdir(), "morsel-docs-"))
          await photo.make(join(folder, "lunch.jpg"))
          // The reader's project, where `npm install ../morsel` linked the clone.
          mkdirSync(join(folder, "node_modules"))
          symlinkSync(root, join(folder, "node_modules/morsel"), "dir")
          // curl as the reader's, but failing on an HTTP error answer.
          mkdirSync(join(folder, ".bin"))
          const curl = join(folder, ".bin/curl")
          const realCurl = (process.env["PATH"] ?? "").split(":").map((dir) => join(dir, "curl")).find((path) => existsSync(path))
          expect(realCurl).toBeDefined()
          writeFileSync(curl, `#!/bin/sh\nexec ${realCurl} --fail-with-body "$@"\n`)
          chmodSync(curl, 0o755)
        }, 120_000)
        afterAll(() => {
          if (folder !== undefined) rmSync(folder, { recursive: true, force: true })
        })

        for (const page of pages) {
          const blocks = shellBlocks(page).filter((block) => !block.marked)
          if (blocks.length === 0) continue
          it(`docs/${page}: its ${blocks.length} shell blocks run as written`, async () => {
            const port = new URL(sandbox.url).port
            const script = blocks
              .map((block) => `printf '\\n%s\\n' ${JSON.stringify(`::: docs/${page}:${block.line}`)}\n${block.text.replaceAll("127.0.0.1:8787", `127.0.0.1:${port}`)}`)
              .join("\n")
            const run = await bash(["-c", `set -eo pipefail\n${script}`], {
              cwd: folder,
              env: { PATH: `${join(folder, ".bin")}:${process.env["PATH"] ?? ""}`, HOME: folder, TMPDIR: tmpdir(), KEY: key }
            })
            const failed = run.output.split("\n").filter((line) => line.startsWith(":::")).pop()
            expect(run.code, `the block at ${failed?.slice(4)} failed (exit ${run.code}):\n${run.output}`).toBe(0)
          }, 240_000)
        }
      })
    }
  })
})

describe("the links of docs/", () => {
  const anchor = (heading: string) =>
    heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-")
  const anchorsOf = (file: string) =>
    new Set(
      readFileSync(file, "utf8")
        .replace(/^```[\s\S]*?^```$/gm, "")
        .split("\n")
        .filter((line) => /^#{1,6} /.test(line))
        .map((line) => anchor(line.replace(/^#+ /, "")))
    )

  it("every relative link names a file that exists, and a heading of it", () => {
    const broken: Array<string> = []
    for (const page of [...pages.map((name) => join(docs, name)), join(root, "README.md")]) {
      const text = readFileSync(page, "utf8").replace(/^```[\s\S]*?^```$/gm, "")
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (target === undefined || /^[a-z]+:/i.test(target)) continue
        const [path = "", hash] = target.split("#")
        const file = path === "" ? page : resolve(dirname(page), path)
        if (!existsSync(file)) broken.push(`${page.slice(root.length + 1)}: ${target} (no such file)`)
        else if (hash !== undefined && file.endsWith(".md") && !anchorsOf(file).has(hash))
          broken.push(`${page.slice(root.length + 1)}: ${target} (no such heading)`)
      }
    }
    expect(broken).toEqual([])
  })
})
