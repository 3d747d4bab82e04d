#!/usr/bin/env node
// Bundles the command line into dist/bundle (morsel.mjs and the chunks it loads on demand): Node loads a few large
// files far faster than thousands of separate modules.
import { rmSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"
import { NODE_BUNDLE } from "./bundling.js"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const outdir = join(root, "dist/bundle")

// The server and the sandbox are imported on demand: in their own chunks, the client commands do not load them.
rmSync(outdir, { recursive: true, force: true })
await build({
  absWorkingDir: root,
  entryPoints: { morsel: "src/cli.ts" },
  outdir,
  ...NODE_BUNDLE
})

// `morsel/client`: its declarations and its browser build.
await import("./bundle-client.js")
