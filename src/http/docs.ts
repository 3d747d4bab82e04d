/**
 * The API reference at /docs: Scalar's page over the OpenAPI document, its script inline so that it works offline.
 * The script (3 MB, which @effect/platform ships as a module of one string) is read on the first visit: a server
 * whose docs nobody reads does not hold it and the page (about 9 MiB).
 */
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { HttpLayerRouter, HttpServerResponse, OpenApi } from "@effect/platform"
import { Effect } from "effect"
import { MorselApi } from "./Api.ts"

/** JSON inside a `<script>` element: no `<` to end it, no line terminators a script cannot hold. */
const scriptJson = (value: unknown) =>
  JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"))

const html = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

const page = Effect.sync(() => {
  const require = createRequire(import.meta.url)
  const { javascript } = require(join(dirname(require.resolve("@effect/platform/HttpApiScalar")), "internal/httpApiScalar.js")) as {
    readonly javascript: string
  }
  const spec = OpenApi.fromApi(MorselApi)
  return HttpServerResponse.html(`<!doctype html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>${html(spec.info.title)}</title>
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <script id="api-reference" type="application/json">${scriptJson(spec)}</script>
    <script>document.getElementById('api-reference').dataset.configuration = JSON.stringify(${scriptJson({ _integration: "html" })})</script>
    <script>${javascript}</script>
  </body>
</html>`)
})

export const DocsRoute = HttpLayerRouter.use((router) =>
  Effect.flatMap(Effect.cached(page), (cached) => router.add("GET", "/docs", cached))
)
