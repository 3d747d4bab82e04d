#!/usr/bin/env node
// Bundles the command line into dist/bundle (morsel.mjs and the chunks it loads on demand): Node loads a few large
// files far faster than thousands of separate modules.
import { rmSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const outdir = join(root, "dist/bundle")

// Chunk names carry a hash: a rebuild starts from an empty folder so that no chunk of an older build is left behind.
rmSync(outdir, { recursive: true, force: true })
await build({
  absWorkingDir: root,
  entryPoints: { morsel: "src/cli.ts" },
  outdir,
  outExtension: { ".js": ".mjs" },
  // The server and the sandbox are imported on demand: in their own chunks, the client commands do not load them.
  splitting: true,
  chunkNames: "[name]-[hash]",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20.19",
  // Less source to read and compile at start; names are kept, so stack traces stay readable.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: "warning",
  // Packages that find their native or WebAssembly files beside their own modules stay in node_modules.
  external: ["sharp", "@electric-sql/pglite", "@electric-sql/pglite-socket", "msgpackr-extract"],
  // The CommonJS dependencies require Node's built-in modules, which an ES module has no `require` for.
  banner: { js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);' }
})
