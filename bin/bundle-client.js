#!/usr/bin/env node
// Builds what `morsel/client` ships beside the compiled Node modules (dist/src/client): its type declarations
// (dist/types/client) and its browser build (dist/client/browser), the one the web page loads from the service.
import { spawnSync } from "node:child_process"
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"

const root = dirname(dirname(fileURLToPath(import.meta.url)))

rmSync(join(root, "dist/types"), { recursive: true, force: true })
const tsc = spawnSync(process.execPath, [createRequire(import.meta.url).resolve("typescript/bin/tsc"), "-p", "tsconfig.client.json"], { cwd: root, stdio: "inherit" })
if (tsc.status !== 0) process.exit(tsc.status ?? 1)
// Declarations name the modules they import as the sources do (./core.ts); a consumer resolves ./core.js to core.d.ts.
const types = join(root, "dist/types/client")
for (const file of readdirSync(types)) {
  const path = join(types, file)
  writeFileSync(path, readFileSync(path, "utf8").replace(/(from "\.\/[^"]+)\.ts"/g, '$1.js"'))
}

const outdir = join(root, "dist/client/browser")
rmSync(outdir, { recursive: true, force: true })
// Paying over x402 (viem and the x402 client) is a chunk of its own, fetched only when a wallet pays.
await build({
  absWorkingDir: root,
  entryPoints: { "morsel-client": "src/client/browser.ts" },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  chunkNames: "[name]-[hash]",
  minify: true,
  logLevel: "warning"
})
