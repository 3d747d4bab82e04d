// CI: the official MCP conformance tool against a running server's /mcp, for the current revision (2026-07-28)
// and for 2025-era clients. Usage: node mcp-conformance.mjs <mcp url> <tool folder 0.2.x> <tool folder 0.1.x>.
// A check fails the run unless it passed; only checks that need the reference server's diagnostic tools
// ("Not testable: …") and skipped ones are let through, and they are counted apart.
import { spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const [url, current, previous] = process.argv.slice(2)
if (!url || !current || !previous) {
  console.error("usage: node mcp-conformance.mjs <mcp url> <conformance 0.2.x folder> <conformance 0.1.x folder>")
  process.exit(2)
}

const runs = [
  ...["server-stateless", "tools-list", "caching", "http-header-validation", "dns-rebinding-protection"].map((scenario) => ({
    tool: current,
    scenario,
    args: ["--spec-version", "2026-07-28"]
  })),
  ...["server-initialize", "ping", "tools-list", "dns-rebinding-protection"].map((scenario) => ({ tool: previous, scenario, args: [] }))
]

const checksFiles = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? checksFiles(path) : name === "checks.json" ? [path] : []
  })

let failed = 0
const rows = []
for (const { tool, scenario, args } of runs) {
  const version = JSON.parse(readFileSync(join(tool, "node_modules/@modelcontextprotocol/conformance/package.json"), "utf8")).version
  const out = mkdtempSync(join(tmpdir(), "mcp-conformance-"))
  const cli = join(tool, "node_modules/@modelcontextprotocol/conformance/dist/index.js")
  const run = spawnSync(process.execPath, [cli, "server", "--url", url, "--scenario", scenario, ...args, "-o", out], {
    encoding: "utf8",
    timeout: 180_000
  })
  const checks = checksFiles(out).flatMap((file) => JSON.parse(readFileSync(file, "utf8")))
  const passed = checks.filter((c) => c.status === "SUCCESS" || c.status === "INFO")
  const notTestable = checks.filter((c) => c.status === "SKIPPED" || (c.status === "FAILURE" && /^Not testable/.test(c.errorMessage ?? "")))
  const failures = checks.filter((c) => !passed.includes(c) && !notTestable.includes(c))
  if (checks.length === 0 || failures.length > 0) failed++
  rows.push([`${scenario} (${version}${args.length ? `, ${args[1]}` : ""})`, passed.length, notTestable.length, failures.length])
  if (checks.length === 0) console.log(`FAIL mcp-conformance: ${scenario} produced no checks:\n${run.stdout}\n${run.stderr}`)
  for (const f of failures) console.log(`FAIL mcp-conformance: ${scenario}: ${f.id}: ${f.errorMessage ?? f.status}`)
}

const width = Math.max(...rows.map((r) => r[0].length))
console.log(`${"scenario".padEnd(width)}  passed  not testable  failed`)
for (const [name, passed, notTestable, failures] of rows) {
  console.log(`${name.padEnd(width)}  ${String(passed).padStart(6)}  ${String(notTestable).padStart(12)}  ${String(failures).padStart(6)}`)
}
if (failed > 0) process.exit(1)
console.log("ok mcp-conformance: every scenario passed")
