// `morsel foods search` and `morsel nutrition` as a person runs them against the sandbox (its shipped SR28 copy).
import { execFile } from "node:child_process"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RunningSandbox, startSandbox } from "../../src/testing.ts"
import { root } from "../support/process.ts"

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

let sandbox: RunningSandbox

const morsel = (args: ReadonlyArray<string>) =>
  new Promise<Run>((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", join(root, "src/cli.ts"), ...args, "--base-url", sandbox.url],
      { cwd: root, env: { PATH: process.env["PATH"] ?? "" }, timeout: 120_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
    )
  })

beforeAll(async () => {
  sandbox = await startSandbox()
}, 120_000)
afterAll(() => sandbox?.close())

describe("morsel foods search and morsel nutrition", () => {
  it("search prints a table of foods, the plain record first; --json the body; --limit bounds it", async () => {
    const run = await morsel(["foods", "search", "tofu", "--limit", "3"])
    expect(run.code).toBe(0)
    const lines = run.stdout.trim().split("\n")
    expect(lines[0]).toMatch(/fdc_id\s+food\s+kcal\/100g/)
    expect(lines.filter((l) => /^\d+\s/.test(l)).length).toBe(3)
    expect(lines.find((l) => /^\d+\s/.test(l))?.toLowerCase()).toContain("tofu")
    const json = await morsel(["foods", "search", "rice, white, cooked", "--json"])
    expect(JSON.parse(json.stdout).foods.length).toBe(10)
  }, 120_000)

  it("nutrition prices grams and a portion, with totals; an unknown food is named with the nearest ones", async () => {
    const run = await morsel(["nutrition", "rice, white, cooked=150", "egg=2 large"])
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/component\s+grams\s+kcal/)
    expect(run.stdout).toMatch(/\(2 large/)
    expect(run.stdout).toMatch(/^total\s+\d/m)
    const json = JSON.parse((await morsel(["nutrition", "egg=2 large", "--json"])).stdout)
    expect(json.items[0].portion.amount).toBe(2)
    const missing = await morsel(["nutrition", "zzqxv chicken=100"])
    expect(missing.stdout).toContain('not counted: "zzqxv chicken"')
    expect(missing.stdout).toContain("incomplete")
  }, 120_000)

  it("nutrition reads a meal in words (arguments without =): what was read, the grams and where they came from, the foods not read", async () => {
    const run = await morsel(["nutrition", "2 large eggs, a slice of toast with butter and a cortado"])
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/you wrote\s+food\s+grams\s+from\s+kcal/)
    expect(run.stdout).toMatch(/^2 large eggs\s+Egg, whole, raw, fresh\s+100\.0\s+2 × large/m)
    expect(run.stdout).toMatch(/^a slice of toast\s+.*\s+22\.0\s+1 × slice/m)
    expect(run.stdout).toMatch(/^butter\s+Butter, salted\s+5\.0\s+typical: 1 × pat/m)
    expect(run.stdout).toMatch(/^total\s+127\.0\s/m)
    expect(run.stdout).toContain('not counted: "a cortado"')
    expect(run.stdout).toContain("incomplete")
    // Words split by the shell are one meal too.
    const words = JSON.parse((await morsel(["nutrition", "1", "tbsp", "olive", "oil", "--json"])).stdout)
    expect(words.items.map((i: { text: string; grams: number; grams_basis: string }) => [i.text, i.grams, i.grams_basis])).toEqual([["1 tbsp olive oil", 13.5, "stated"]])
  }, 120_000)

  it("errors are one line naming the fix, exit 1", async () => {
    const [mixed, blank] = await Promise.all([morsel(["nutrition", "rice=150", "an apple"]), morsel(["nutrition", " "])])
    expect([mixed.code, mixed.stderr.trim().split("\n").length]).toEqual([1, 1])
    expect(mixed.stderr).toContain("egg=2 large")
    expect(mixed.stderr).toContain("without \"=\"")
    expect([blank.code, blank.stderr]).toEqual([1, expect.stringContaining("text")])
    const badUnit = await morsel(["nutrition", "egg=1 bucket"])
    expect(badUnit.code).toBe(1)
    expect(badUnit.stderr).toContain("bucket")
    const tooMany = await morsel(["foods", "search", "rice", "--limit", "26"])
    expect(tooMany.code).toBe(1)
    expect(tooMany.stderr).toContain("limit")
  }, 120_000)
})
