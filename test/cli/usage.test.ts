// Mistyped commands and options get one line that names the option or the nearest command; help is short and shows
// how each command is typed.
import { execFile } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { root } from "../support/process.ts"

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const morsel = (args: ReadonlyArray<string>) =>
  new Promise<Run>((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", join(root, "src/cli.ts"), ...args],
      // No server anywhere: a usage error must come before any connection.
      { cwd: root, env: { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp", MORSEL_BASE_URL: "http://127.0.0.1:9" }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
    )
  })


describe("morsel usage", () => {
  it("names the option and what it takes, and suggests the nearest command or option", async () => {
    const photo = join(root, "test/fixtures/lunch.jpg")
    // Two at a time: each process loads the CLI afresh.
    const [buyy, analyse] = await Promise.all([morsel(["credits", "buyy"]), morsel(["analyse", photo])])
    const [language, grams] = await Promise.all([morsel(["analyze", photo, "--language", "de"]), morsel(["analyze", photo, "--grams", "abc"])])
    const [misspelt, asJson] = await Promise.all([morsel(["analyze", photo, "--langauge", "lt"]), morsel(["credits", "balance", "--kye", "x", "--json"])])
    const failures = [buyy, analyse, language, grams, misspelt]
    for (const run of failures) {
      expect(run.code).toBe(1)
      expect(run.stdout).toBe("")
    }
    expect(failures.map((run) => run.stderr)).toEqual([
      'morsel: morsel credits has no command "buyy"; did you mean morsel credits buy? (commands: buy, balance, status)\n',
      'morsel: morsel has no command "analyse"; did you mean morsel analyze? (commands: serve, migrate, key, fooddb, analyze, credits, foods, nutrition, admin, model)\n',
      'morsel: --language takes en or lt, not "de"\n',
      'morsel: --grams takes a number, not "abc"\n',
      "morsel: morsel analyze has no option --langauge; did you mean --language? (see morsel analyze --help)\n"
    ])
    expect(asJson.code).toBe(1)
    expect(JSON.parse(asJson.stdout)).toEqual({
      error: { code: "usage", message: "morsel credits balance has no option --kye; did you mean --key? (see morsel credits balance --help)" }
    })
  }, 120_000)

  it("help is short and shows how the command is typed, --verbose included", async () => {
    const [analyzeHelp, creditsHelp] = await Promise.all([morsel(["analyze", "--help"]), morsel(["credits"])])
    const bare = await morsel([])
    expect(analyzeHelp.code).toBe(0)
    const lines = analyzeHelp.stdout.trimEnd().split("\n")
    expect(lines.length).toBeLessThanOrEqual(30)
    expect(analyzeHelp.stdout).toContain("Usage: morsel analyze <photo> [options]")
    expect(analyzeHelp.stdout).toMatch(/^ {2}--grams <number> +the meal's weighed total in grams \(1 to 5000\)$/m)
    expect(analyzeHelp.stdout).toMatch(/^ {2}--language en\|lt +language of the names: en or lt$/m)
    expect(analyzeHelp.stdout).toMatch(/^ {2}--verbose +/m)
    expect(analyzeHelp.stdout).toMatch(/^ {2}--resume <text> +/m)
    expect(analyzeHelp.stdout).not.toContain("This setting is optional")
    expect(analyzeHelp.stdout).not.toContain("$ analyze")
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(80)

    expect(creditsHelp.stdout).toContain("Usage: morsel credits <command> [options]")
    expect(creditsHelp.stdout).toMatch(/^ {2}buy +Start/m)
    expect(creditsHelp.stdout).toMatch(/^ {2}balance +Credits remaining/m)
    expect(bare.stdout).toContain("Usage: morsel <command> [options]")
    expect(bare.stdout).toMatch(/^ {2}analyze +Analyze a food photo/m)
  }, 120_000)

  it("an admin command with no server to reach names the fix, as every client command does", async () => {
    const down = await morsel(["admin", "counters", "--token", "not-needed-yet"])
    expect(down.code).toBe(1)
    expect(down.stderr.trimEnd().split("\n")).toHaveLength(1)
    expect(down.stderr).toMatch(/^morsel: cannot reach the morsel server at http:\/\/127\.0\.0\.1:9 \(.+\): start one with `morsel serve --sandbox`, or give --base-url or set MORSEL_BASE_URL\n$/)
  }, 60_000)
})
