// deploy/: the systemd unit and the example environment file docs/operating.md installs. The unit parses into the
// sections and directives systemd knows, is hardened, and starts the built command; every variable of the
// environment file is a setting the service reads, and its values are accepted as they stand.
import { execFile } from "node:child_process"
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { AppConfig, AppConfigFromEnv } from "../../src/config.ts"
import { settingNames } from "../support/settingNames.ts"

const root = join(import.meta.dirname, "../..")
const unitText = readFileSync(join(root, "deploy/morsel.service"), "utf8")
const envText = readFileSync(join(root, "deploy/morsel.env"), "utf8")

/** The unit as systemd reads it: sections of `Key=value` lines; a key may come more than once. */
const parseUnit = (text: string) => {
  const sections = new Map<string, Array<readonly [string, string]>>()
  let current: Array<readonly [string, string]> | undefined
  const problems: Array<string> = []
  text.split("\n").forEach((line, i) => {
    const trimmed = line.trim()
    if (trimmed === "" || trimmed.startsWith("#") || trimmed.startsWith(";")) return
    const section = /^\[([A-Za-z]+)\]$/.exec(trimmed)
    if (section !== null) {
      current = []
      sections.set(section[1]!, current)
      return
    }
    const entry = /^([A-Za-z][A-Za-z0-9]*)=(.*)$/.exec(trimmed)
    if (entry === null || current === undefined) problems.push(`line ${i + 1}: ${line}`)
    else current.push([entry[1]!, entry[2]!])
  })
  return { sections, problems }
}

/** The directives of each section this unit may use (systemd.unit, systemd.service, systemd.exec, systemd.kill). */
const KNOWN: Record<string, ReadonlySet<string>> = {
  Unit: new Set(["Description", "Documentation", "After", "Before", "Wants", "Requires"]),
  Service: new Set([
    "Type", "DynamicUser", "User", "Group", "StateDirectory", "StateDirectoryMode", "RuntimeDirectory", "RuntimeDirectoryMode",
    "WorkingDirectory", "EnvironmentFile", "Environment", "ExecStart", "KillSignal", "TimeoutStopSec", "Restart", "RestartSec",
    "UMask", "NoNewPrivileges", "CapabilityBoundingSet", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices",
    "ProtectClock", "ProtectControlGroups", "ProtectHostname", "ProtectKernelLogs", "ProtectKernelModules", "ProtectKernelTunables",
    "ProtectProc", "LockPersonality", "RestrictAddressFamilies", "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID",
    "SystemCallArchitectures", "SystemCallFilter", "MemoryDenyWriteExecute"
  ]),
  Install: new Set(["WantedBy"])
}

const { sections, problems } = parseUnit(unitText)
const values = (section: string, key: string) => (sections.get(section) ?? []).filter(([name]) => name === key).map(([, value]) => value)
const value = (section: string, key: string) => values(section, key).at(-1)

/** The environment file's `NAME=value` lines. */
const envEntries = envText
  .split("\n")
  .filter((line) => line.trim() !== "" && !line.trim().startsWith("#"))
  .map((line) => {
    const match = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line)
    expect(match, `deploy/morsel.env: "${line}" is not NAME=value`).not.toBeNull()
    return [match![1]!, match![2]!] as const
  })

describe("deploy/morsel.service", () => {
  it("has the sections [Unit], [Service] and [Install], and only directives systemd knows in each", () => {
    expect(problems).toEqual([])
    expect([...sections.keys()]).toEqual(["Unit", "Service", "Install"])
    for (const [section, entries] of sections) {
      for (const [key] of entries) expect(KNOWN[section]?.has(key), `[${section}] ${key}`).toBe(true)
    }
    expect(value("Install", "WantedBy")).toBe("multi-user.target")
  })

  it("is hardened: a user of its own, no new privileges, a read-only system, its own state and runtime folders", () => {
    expect(value("Service", "DynamicUser")).toBe("yes")
    expect(value("Service", "User")).toBe("morsel")
    expect(value("Service", "NoNewPrivileges")).toBe("yes")
    expect(value("Service", "ProtectSystem")).toBe("strict")
    expect(value("Service", "ProtectHome")).toBe("yes")
    expect(value("Service", "CapabilityBoundingSet")).toBe("")
    expect(value("Service", "StateDirectory")).toBe("morsel")
    expect(value("Service", "RuntimeDirectory")).toBe("morsel")
    expect(value("Service", "UMask")).toBe("0077")
    // Node compiles code at run time: W^X memory would stop it.
    expect(value("Service", "MemoryDenyWriteExecute")).toBe("no")
    // The embedded database and temporary files live in those folders, the only ones the service may write.
    const environment = values("Service", "Environment").join(" ")
    expect(environment).toContain("MORSEL_DATA_DIR=/var/lib/morsel/")
    expect(environment).toContain("TMPDIR=/run/morsel")
    expect(value("Service", "EnvironmentFile")).toBe("/etc/morsel.env")
  })

  it("starts the built command with node as the server itself, tuned as `morsel serve` would tune itself", async () => {
    const [node, script, ...args] = (value("Service", "ExecStart") ?? "").split(" ")
    expect(node).toMatch(/^\/usr(\/local)?\/bin\/node$/)
    expect(script).toMatch(/^\/opt\/morsel\//)
    expect(existsSync(join(root, script!.slice("/opt/morsel/".length))), script).toBe(true)
    expect(args).toEqual(["serve"])
    const { SERVE_ENV, SERVE_NODE_OPTIONS } = await import("../../bin/tuning.js")
    const environment = values("Service", "Environment").join(" ")
    for (const [name, setting] of Object.entries(SERVE_ENV)) expect(environment).toContain(`${name}=${setting}`)
    for (const option of SERVE_NODE_OPTIONS) expect(environment).toContain(option)
    expect(value("Service", "KillSignal")).toBe("SIGTERM")
  })

  it("passes `systemd-analyze verify` where systemd is installed", async () => {
    const analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].find((path) => existsSync(path))
    if (analyze === undefined || !existsSync("/usr/bin/node")) return
    const folder = mkdtempSync(join(tmpdir(), "morsel-unit-"))
    try {
      copyFileSync(join(root, "deploy/morsel.service"), join(folder, "morsel.service"))
      const run = await new Promise<{ code: number; output: string }>((resolve) =>
        execFile(analyze, ["verify", join(folder, "morsel.service")], (error, stdout, stderr) =>
          resolve({ code: error === null ? 0 : Number(error.code ?? 1), output: `${stdout}${stderr}` })
        )
      )
      // The unit's own lines only: the host's other units are not ours to judge.
      const ours = run.output.split("\n").filter((line) => line.includes("morsel.service"))
      expect(ours, run.output).toEqual([])
    } finally {
      rmSync(folder, { recursive: true, force: true })
    }
  })
})

describe("deploy/morsel.env", () => {
  it("names only settings the service reads, each once", () => {
    const known = settingNames()
    expect(known.has("X402_PAY_TO")).toBe(true)
    const names = envEntries.map(([name]) => name)
    expect(names.filter((name) => !known.has(name))).toEqual([])
    expect(new Set(names).size).toBe(names.length)
  })

  it("is accepted as it stands (empty values are unset)", () => {
    const read = Effect.runSync(Effect.either(Effect.provide(AppConfig, AppConfigFromEnv(Object.fromEntries(envEntries)))))
    expect(Either.isRight(read), Either.isLeft(read) ? String(read.left) : "").toBe(true)
  })
})
