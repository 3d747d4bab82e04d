/**
 * The layering of src/, checked by dependency-cruiser (`npm run layers`, in CI): each rule names the rooms it keeps
 * apart. docs/architecture.md describes the same layers rule by rule; test/architecture/layers.test.ts holds the two
 * together and proves that a forbidden import fails.
 */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "No circle of imports anywhere in src/: a room is read from the bottom up.",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true }
    },
    {
      name: "domain-imports-nothing-of-ours",
      comment: "src/domain/ holds the wire schemas and errors every room shares; it imports only itself.",
      severity: "error",
      from: { path: "^src/domain/" },
      to: { path: "^src/", pathNot: "^src/domain/" }
    },
    {
      name: "db-imports-no-feature",
      comment: "src/db/ is storage: it may read the settings and the domain, never a feature or a face.",
      severity: "error",
      from: { path: "^src/db/" },
      to: { path: "^src/", pathNot: "^src/(db|domain)/|^src/(config|ids|background)\\.ts$" }
    },
    {
      name: "request-reading-imports-no-feature",
      comment: "src/request/ reads a request (body, JSON, depth, address) for REST and MCP alike: below every face and feature.",
      severity: "error",
      from: { path: "^src/request/" },
      to: { path: "^src/", pathNot: "^src/(request|domain)/|^src/config\\.ts$" }
    },
    {
      name: "foods-core-imports-no-face-or-feature",
      comment: "The food database (src/foods/core/) is what analysis and every face use; it imports no face, no analysis, credits or limits.",
      severity: "error",
      from: { path: "^src/foods/core/" },
      to: { path: "^src/", pathNot: "^src/(foods/core|domain|db)/|^src/(config|ids|terminal)\\.ts$|^src/limits/window\\.ts$" }
    },
    {
      name: "analysis-uses-only-the-foods-core",
      comment: "An analysis prices its items through the food database, never through a face of the foods feature.",
      severity: "error",
      from: { path: "^src/analysis/" },
      to: { path: "^src/foods/", pathNot: "^src/foods/core/" }
    },
    {
      name: "mcp-face-not-rest-face",
      comment: "The tool face (MCP) and the REST face share what they need through src/request/ and the features, never each other.",
      severity: "error",
      from: { path: "^src/mcp/|^src/foods/faces/mcp\\.ts$" },
      to: { path: "^src/http/|^src/foods/faces/(api|http|lane)\\.ts$" }
    },
    {
      name: "rest-face-not-mcp-face",
      comment: "The REST face never reaches into the tool face.",
      severity: "error",
      from: { path: "^src/http/|^src/foods/faces/(api|http|lane)\\.ts$|^src/[a-z0-9]+/http\\.ts$" },
      to: { path: "^src/mcp/|^src/foods/faces/mcp\\.ts$" }
    },
    {
      name: "no-feature-imports-the-cli-or-web",
      comment: "The command line and the web page sit on top: no service code imports them.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(cli|web)/|^src/(cli|server)\\.ts$" },
      to: { path: "^src/(cli|web)/|^src/cli\\.ts$" }
    },
    {
      name: "features-import-no-composition",
      comment: "src/server.ts and the sandbox compose the service; nothing below them imports them.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(sandbox)/|^src/(server|cli|testing)\\.ts$" },
      to: { path: "^src/(sandbox/|server\\.ts$|testing\\.ts$)" }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^src/(web/static|mcp/app)/.*\\.js$" },
    tsConfig: { fileName: "tsconfig.json" },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: [".ts", ".js", ".mjs"] }
  }
}
