#!/usr/bin/env node
// Bundles the command line into one file, dist/morsel.mjs: Node loads it far faster than thousands of separate modules.
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"

const root = dirname(dirname(fileURLToPath(import.meta.url)))

await build({
  absWorkingDir: root,
  entryPoints: ["src/cli.ts"],
  outfile: join(root, "dist/morsel.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20.19",
  logLevel: "warning",
  // Packages that find their native or WebAssembly files beside their own modules stay in node_modules.
  external: ["sharp", "@electric-sql/pglite", "@electric-sql/pglite-socket", "msgpackr-extract"],
  // The CommonJS dependencies require Node's built-in modules, which an ES module has no `require` for.
  banner: { js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);' }
})
