/** The layering of src/: the rules of .dependency-cruiser.cjs hold for the tree, fail for a forbidden import, and are the ones docs/architecture.md describes. */
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const root = dirname(dirname(dirname(fileURLToPath(import.meta.url))))
const config = join(root, ".dependency-cruiser.cjs")
const depcruise = join(root, "node_modules/.bin/depcruise")
const run = promisify(execFile)

const ruleNames = (): ReadonlyArray<string> => (createRequire(import.meta.url)(config) as { forbidden: ReadonlyArray<{ name: string }> }).forbidden.map((rule) => rule.name)

/** depcruise over a tree's src/ with the project's rules: its exit code and what it printed. */
const cruise = async (cwd: string) => {
  try {
    const { stdout } = await run(depcruise, ["src", "--config", config, "--output-type", "err"], { cwd })
    return { code: 0, out: stdout }
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string }
    return { code: failed.code ?? 1, out: `${failed.stdout ?? ""}${failed.stderr ?? ""}` }
  }
}

/** A small tree of ours with the given files (path → source), shaped as src/ is. */
const treeWith = (files: Readonly<Record<string, string>>) => {
  const dir = mkdtempSync(join(tmpdir(), "morsel-layers-"))
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", allowImportingTsExtensions: true, noEmit: true } }))
  for (const [path, source] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), source)
  }
  return dir
}

describe("the layering of src/", () => {
  it("holds for the tree as it is", async () => {
    const { code, out } = await cruise(root)
    expect(out).toContain("no dependency violations found")
    expect(code).toBe(0)
  }, 60_000)

  it("fails, naming the rule, for a forbidden import: the food database importing a face, the tool face the REST face, a circle", async () => {
    const dir = treeWith({
      "src/foods/core/nutrition.ts": 'import { tool } from "../../mcp/tool.ts"\nexport const n = tool\n',
      "src/mcp/tool.ts": 'import { guard } from "../http/transport.ts"\nexport const tool = guard\n',
      "src/http/transport.ts": 'import { a } from "../request/a.ts"\nexport const guard = a\n',
      "src/request/a.ts": 'import { b } from "./b.ts"\nexport const a = b\n',
      "src/request/b.ts": 'import { a } from "./a.ts"\nexport const b = () => a\n'
    })
    try {
      const { code, out } = await cruise(dir)
      expect(code).not.toBe(0)
      expect(out).toContain("foods-core-imports-no-face-or-feature: src/foods/core/nutrition.ts → src/mcp/tool.ts")
      expect(out).toContain("mcp-face-not-rest-face: src/mcp/tool.ts → src/http/transport.ts")
      expect(out).toContain("no-circular: src/request/a.ts")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it("is the layering docs/architecture.md describes: every rule is named there", () => {
    const doc = readFileSync(join(root, "docs/architecture.md"), "utf8")
    const missing = ruleNames().filter((name) => !doc.includes(`\`${name}\``))
    expect(missing).toEqual([])
    expect(ruleNames().length).toBeGreaterThanOrEqual(8)
  })
})
