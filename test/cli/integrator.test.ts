// docs/testing.md's example, run as written in another project that installed morsel from its clone (a link to
// it, as `npm install ../morsel` makes) with the fixture the page names: the page's test must pass there.
import { execFile } from "node:child_process"
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"
import { root } from "../support/process.ts"

const run = promisify(execFile)

describe("docs/testing.md", () => {
  const project = mkdtempSync(join(tmpdir(), "morsel-integrator-"))
  afterAll(() => rmSync(project, { recursive: true, force: true }))

  it("its example test passes as written in a project that installed morsel from the clone", async () => {
    const page = readFileSync(join(root, "docs/testing.md"), "utf8")
    const example = /```ts\n([\s\S]*?)```/.exec(page)?.[1]
    expect(example).toContain('from "morsel/testing"')
    const fixture = /readFileSync\("([^"]+)"\)/.exec(example ?? "")?.[1]
    expect(fixture).toBe("test/fixtures/lunch.jpg")

    // `morsel/testing` is the built package: the build is what `npm ci` in the clone leaves.
    await run(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root })
    mkdirSync(join(project, "node_modules"))
    mkdirSync(join(project, "test/fixtures"), { recursive: true })
    symlinkSync(root, join(project, "node_modules/morsel"), "dir")
    symlinkSync(join(root, "node_modules/vitest"), join(project, "node_modules/vitest"), "dir")
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "integrator", private: true, type: "module" }))
    copyFileSync(join(root, fixture ?? ""), join(project, fixture ?? ""))
    writeFileSync(join(project, "test/morsel.test.ts"), example ?? "")

    const tested = await run(process.execPath, [join(root, "node_modules/vitest/vitest.mjs"), "run"], {
      cwd: project,
      env: { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp", HOME: project, NO_COLOR: "1" },
      timeout: 240_000
    }).catch((error: { stdout?: string; stderr?: string }) => ({ stdout: `${error.stdout ?? ""}${error.stderr ?? ""}`, stderr: "" }))
    expect(tested.stdout).toMatch(/Tests\s+1 passed \(1\)/)
  }, 300_000)
})
