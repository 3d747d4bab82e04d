// The TypeScript of docs/client.md and of the README's client section, as a reader's project has it (morsel
// installed from the clone): every block compiles under strict TypeScript against the built package's types, and
// every block not marked `<!-- compiled only: why -->` runs against a sandbox with a phone's photo. (docs/testing.md's
// example runs as written in test/cli/integrator.test.ts.)
import { execFile } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { generatePrivateKey } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newCreditKey } from "../../src/credits/keys.ts"
import { send } from "../support/http.ts"
import { phonePhoto } from "../support/phonePhoto.ts"
import { root, type Served, serveProcess } from "../support/process.ts"

interface TsBlock {
  readonly where: string
  readonly text: string
  readonly compiledOnly: boolean
}

const tsBlocks = (page: string, section?: string): Array<TsBlock> => {
  const whole = readFileSync(join(root, page), "utf8")
  const start = section === undefined ? 0 : whole.indexOf(section)
  const end = section === undefined ? whole.length : whole.indexOf("\n## ", start + 1)
  const offset = whole.slice(0, start).split("\n").length - 1
  const lines = whole.slice(start, end).split("\n")
  const blocks: Array<TsBlock> = []
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== "```ts") continue
    const close = lines.findIndex((line, j) => j > i && line.startsWith("```"))
    blocks.push({
      where: `${page}:${offset + i + 1}`,
      text: lines.slice(i + 1, close).join("\n"),
      compiledOnly: /^<!-- compiled only: [^>]+ -->$/.test(lines[i - 1] ?? "")
    })
    i = close
  }
  return blocks
}

const blocks = [...tsBlocks("docs/client.md"), ...tsBlocks("README.md", "## Client library")]

/** What a block may use that the page gave it earlier or leaves to the reader: a client, a photo, a place to keep things. */
const prelude = (imported: ReadonlyArray<string>) => `import { readFileSync } from "node:fs"
import * as client from "morsel/client"
${["createClient", "MorselError"].filter((name) => !imported.includes(name)).map((name) => `const ${name} = client.${name}`).join("\n")}
const baseUrl = process.env.MORSEL_BASE_URL ?? ""
const walletPrivateKey = (process.env.WALLET_PRIVATE_KEY ?? "0x") as \`0x\${string}\`
const photo = "IMG_2041.jpg"
const bytes = new Uint8Array(readFileSync(photo))
const requestId: string | undefined = undefined
const kept = new Map<string | undefined, string>()
const save = async (id: string | undefined, text: string) => void kept.set(id, text)
const load = async (id: string | undefined) => kept.get(id) ?? "{}"
const morsel = createClient({ baseUrl, apiKey: process.env.MORSEL_API_KEY })
declare const meal: client.AnalysisResult
`

/** The block as a module: its imports first, the rest as the body of a function that the module awaits. */
const moduleOf = (block: TsBlock, port: string) => {
  const lines = block.text.replaceAll("127.0.0.1:8787", `127.0.0.1:${port}`).split("\n")
  const imports = lines.filter((line) => line.startsWith("import "))
  const imported = imports.flatMap((line) => /\{([^}]*)\}/.exec(line)?.[1]?.split(",").map((name) => name.trim()) ?? [])
  const body = lines.filter((line) => !line.startsWith("import "))
  return `${imports.join("\n")}\n${prelude(imported)}\nconst run = async () => {\n${body.join("\n")}\n}\nawait run()\nexport {}\n`
}

const run = promisify(execFile)

describe("the TypeScript of docs/client.md and the README", () => {
  let sandbox: Served
  let project: string
  beforeAll(async () => {
    await run(process.execPath, [join(root, "bin/build-if-stale.js")], { cwd: root })
    sandbox = await serveProcess(["--sandbox"], { MORSEL_DATA_DIR: "memory://" })
    project = mkdtempSync(join(tmpdir(), "morsel-client-docs-"))
    mkdirSync(join(project, "node_modules/@types"), { recursive: true })
    symlinkSync(root, join(project, "node_modules/morsel"), "dir")
    symlinkSync(join(root, "node_modules/@types/node"), join(project, "node_modules/@types/node"), "dir")
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "reader", private: true, type: "module" }))
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { strict: true, module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", noEmit: true, skipLibCheck: true, types: ["node"] } })
    )
    writeFileSync(join(project, "IMG_2041.jpg"), await phonePhoto())
  }, 240_000)
  afterAll(async () => {
    await sandbox?.stop()
    if (project !== undefined) rmSync(project, { recursive: true, force: true })
  })

  it("there are blocks, and every one compiles under strict TypeScript against the package's types", async () => {
    expect(blocks.length).toBeGreaterThanOrEqual(8)
    const port = new URL(sandbox.url).port
    for (const [i, block] of blocks.entries()) writeFileSync(join(project, `block${i}.ts`), `// ${block.where}\n${moduleOf(block, port)}`)
    const compiled = await run(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", project], { cwd: project }).then(
      () => "",
      (error: { stdout?: string }) => error.stdout ?? String(error)
    )
    expect(compiled).toBe("")
  }, 240_000)

  it("every block not marked compiled-only runs against the sandbox with a phone's photo", async () => {
    const key = newCreditKey(true)
    const checkout = await send(`${sandbox.url}/v1/credits/checkout`, { headers: { authorization: `Bearer ${key}` }, body: { order_id: randomUUID() } })
    await send(`${sandbox.url}/sandbox/checkout/${(checkout.body as { session_id: string }).session_id}/pay`, { method: "POST" })
    const env = {
      PATH: process.env["PATH"] ?? "",
      TMPDIR: tmpdir(),
      MORSEL_BASE_URL: sandbox.url,
      MORSEL_API_KEY: key,
      WALLET_PRIVATE_KEY: generatePrivateKey()
    }
    const runnable = blocks.map((block, i) => ({ block, file: `block${i}.ts` })).filter(({ block }) => !block.compiledOnly)
    expect(runnable.length).toBe(blocks.length - 1)
    for (const { block, file } of runnable) {
      const ran = await run(process.execPath, ["--import", join(root, "node_modules/tsx/dist/esm/index.mjs"), file], { cwd: project, env, timeout: 120_000 }).then(
        ({ stdout }) => ({ ok: true, output: stdout }),
        (error: { stdout?: string; stderr?: string }) => ({ ok: false, output: `${error.stdout ?? ""}${error.stderr ?? ""}` })
      )
      expect(ran.ok, `${block.where} failed:\n${ran.output}`).toBe(true)
    }
  }, 600_000)
})
