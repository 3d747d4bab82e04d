// How morsel is bundled for Node (bin/bundle.js, and the service benchmark's morsel, which must run as shipped).

import { fileURLToPath } from "node:url"

/** esbuild options shared by every bundle of morsel's code. */
export const NODE_BUNDLE = {
  bundle: true,
  platform: "node",
  format: "esm",
  // Code imported on demand (the server, the sandbox, the importer) is a chunk of its own, loaded when first used.
  // Chunk names carry a hash: a rebuild starts from an empty output folder, so that no older chunk is left behind.
  splitting: true,
  chunkNames: "[name]-[hash]",
  outExtension: { ".js": ".mjs" },
  target: "node20.19",
  // Less source to read and compile at start; names are kept, so stack traces stay readable.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: "warning",
  // Packages that find their native or WebAssembly files beside their own modules stay in node_modules.
  external: ["sharp", "@electric-sql/pglite", "@electric-sql/pglite-socket", "msgpackr-extract", "fs-native-extensions"],
  // The CommonJS dependencies require Node's built-in modules, which an ES module has no `require` for.
  // undici is evaluated only if used (see undici-on-demand.js).
  alias: { undici: fileURLToPath(new URL("./undici-on-demand.js", import.meta.url)) },
  banner: { js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);' }
}
