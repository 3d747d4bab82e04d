// What the docs name must exist: a sentence of docs/*.md or README.md that names a repository file, a flag of the
// `morsel` command, a setting or an API path that does not exist fails here, with the page and the line.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { OpenApi } from "@effect/platform"
import { describe, expect, it } from "vitest"
import { MorselApi } from "../../src/http/Api.ts"
import { settingNames } from "../support/settingNames.ts"

const root = join(import.meta.dirname, "../..")
const pages = [...readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`), "README.md"]

interface Mention {
  readonly where: string
  readonly text: string
  /** The language of the fenced block the line is in; "" for prose. */
  readonly lang: string
}

/** Every backticked span of the prose and every line of the fenced blocks, with its page and line. */
const mentions = (page: string): Array<Mention> => {
  const found: Array<Mention> = []
  let fenced: string | undefined
  readFileSync(join(root, page), "utf8")
    .split("\n")
    .forEach((line, i) => {
      const where = `${page}:${i + 1}`
      if (line.startsWith("```")) {
        fenced = fenced === undefined ? line.slice(3).trim() : undefined
        return
      }
      if (fenced !== undefined) found.push({ where, text: line, lang: fenced })
      else for (const [, span] of line.matchAll(/`([^`]+)`/g)) found.push({ where, text: span ?? "", lang: "" })
    })
  return found
}

const all = pages.flatMap(mentions)

/** Whether a word has a placeholder in it rather than a name: `test/support/*.ts`, `MODEL_PRICE_*`, `<pkg>`, `…`. */
const placeholder = (word: string) => /[*…<>{}$]/.test(word)

/** Every file under a folder, recursively (the sources, for the names they read). */
const filesUnder = (folder: string): Array<string> =>
  readdirSync(join(root, folder), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(`${folder}/${entry.name}`) : entry.name.endsWith(".ts") || entry.name.endsWith(".js") ? [`${folder}/${entry.name}`] : []
  )
const sources = [...filesUnder("src"), ...filesUnder("bin")].map((file) => readFileSync(join(root, file), "utf8")).join("\n")
const tests = filesUnder("test").map((file) => readFileSync(join(root, file), "utf8")).join("\n")

describe("what the docs name exists", () => {
  it("every repository path they name is there (a file, a folder, or a test named without .test.ts)", () => {
    const topLevel = new Set(readdirSync(root).filter((name) => !["node_modules", "dist", ".git"].includes(name)))
    // What a run writes (benchmark results, screenshots) is named by the docs but kept out of the repository.
    const written = readFileSync(join(root, ".gitignore"), "utf8").split("\n").filter((line) => line.includes("/") && !line.startsWith("*"))
    const missing: Array<string> = []
    for (const { where, text } of all) {
      for (const [word = ""] of text.matchAll(/(?<![\w/.@:-])\.?[A-Za-z0-9_-]+(?:\/[A-Za-z0-9_.@-]+)+\/?/g)) {
        const path = word.replace(/[.,:;)]+$/, "")
        const first = path.split("/")[0] ?? ""
        if (!topLevel.has(first) || written.some((folder) => path.startsWith(folder))) continue
        const candidates = [path, `${path}.ts`, `${path}.test.ts`]
        if (!candidates.some((candidate) => existsSync(join(root, candidate)))) missing.push(`${where}: ${path}`)
      }
    }
    expect(missing).toEqual([])
  })

  it("every --flag given to morsel is one of its options", () => {
    const options = new Set([
      ...Array.from(sources.matchAll(/Options\.[a-zA-Z]+\(\s*"([a-z][a-z0-9-]*)"/g), (match) => match[1]),
      // The command line's own: help, version, the whole cause of a failure, and @effect/cli's built-ins.
      "help",
      "version",
      "verbose",
      "wizard",
      "completions",
      "log-level"
    ])
    const unknown: Array<string> = []
    for (const { where, text } of all) {
      // The words after `morsel` up to the end of that command (a pipe, `;`, `&&`, `)` or a comment).
      for (const [, args = ""] of text.matchAll(/(?:^|[\s(`$])morsel\s+([^|;&#)`]*)/g)) {
        for (const [, flag = ""] of args.matchAll(/(?:^|\s)--([a-z][a-z0-9-]*)/g)) if (!options.has(flag)) unknown.push(`${where}: --${flag}`)
      }
    }
    expect(unknown).toEqual([])
  })

  it("every UPPER_CASE setting they name is one the service or the command line reads", () => {
    const read = new Set([
      ...settingNames(),
      // Read by the command line and its tests, or by what runs it (Node, glibc, systemd, terminals).
      ...Array.from(`${sources}\n${tests}`.matchAll(/process\.env(?:\.|\[")([A-Z][A-Z0-9_]+)/g), (match) => match[1]),
      // Names the code exports (`SANDBOX_MEALS`): the docs quote them as names of the API, not as settings.
      ...Array.from(sources.matchAll(/export const ([A-Z][A-Z0-9_]+)/g), (match) => match[1]),
      "TEST_DATABASE_URL",
      "MORSEL_SR28_DIR",
      "NODE_EXTRA_CA_CERTS",
      "MALLOC_TRIM_THRESHOLD_",
      "MALLOC_ARENA_MAX",
      "CREDENTIALS_DIRECTORY"
    ])
    const unknown: Array<string> = []
    // Program text names its own constants (`WALLET_KEY` in an example); its settings come as process.env.NAME.
    for (const { where, text, lang } of all) {
      if (["ts", "js", "json"].includes(lang) && !text.includes("process.env")) continue
      // Not a shell variable the reader fills in (`$REQUEST_ID`, `ORDER_ID=…`), nor a file name (`FOOD_DES.txt`).
      for (const [name = ""] of text.matchAll(/(?<![\w$-])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+_?(?![\w*…-]|\.[a-z])/g)) {
        if (new RegExp(`(^|\\s)${name}=\\$\\(`).test(text) || shellVariables.has(name)) continue
        if (!read.has(name) && !NOT_SETTINGS.has(name)) unknown.push(`${where}: ${name}`)
      }
    }
    expect(unknown).toEqual([])
  })

  it("every /v1/ path they name is a path of the API (or of the servers it calls, named as theirs)", () => {
    const paths = Object.keys(OpenApi.fromApi(MorselApi).paths).map(
      (path) => new RegExp(`^${path.replace(/[.]/g, "\\.").replace(/\{[^}]+\}/g, "[^/]+")}$`)
    )
    const unknown: Array<string> = []
    for (const { where, text } of all) {
      for (const [path = ""] of text.matchAll(/\/v1\/[A-Za-z0-9_{}/.-]*[A-Za-z0-9_}]/g)) {
        if (placeholder(path) && !path.includes("{")) continue
        if (!paths.some((pattern) => pattern.test(path)) && !FOREIGN_PATHS.has(path)) unknown.push(`${where}: ${path}`)
      }
    }
    expect(unknown).toEqual([])
  })

  it("found something to check on every page", () => {
    for (const page of pages) expect(mentions(page).length, page).toBeGreaterThan(0)
    expect(statSync(join(root, "README.md")).size).toBeGreaterThan(0)
  })
})

/** Upper-case words of the docs that are no setting: PostgreSQL's marker file of a data folder, a USDA SR28 table. */
const NOT_SETTINGS = new Set<string>(["PG_VERSION", "FOOD_DES"])

/** Shell variables the docs' commands assign and use (`REQUEST_ID=$(…)`, then `$REQUEST_ID`). */
const shellVariables = new Set(
  all.flatMap(({ text }) => Array.from(text.matchAll(/(?:^|[\s(])\$\{?([A-Z][A-Z0-9_]*)|(?:^|\s)([A-Z][A-Z0-9_]*)=\$\(/g), (match) => match[1] ?? match[2] ?? ""))
)

/** Paths of the servers morsel calls: an OpenAI-compatible model server, an OTLP trace collector. */
const FOREIGN_PATHS = new Set(["/v1/chat/completions", "/v1/traces"])
