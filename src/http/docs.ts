/**
 * The API reference at /docs: Scalar's page over the OpenAPI document, its script inline so that it works offline.
 * The script (3 MB, which @effect/platform ships as a module of one string) is read on the first visit: a server
 * whose docs nobody reads does not hold it. The page is then compressed once (gzip and brotli, in libuv's thread
 * pool, not on the event loop) and answered as the visitor's Accept-Encoding allows, with an ETag and a cache time.
 */
import { createHash } from "node:crypto"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { promisify } from "node:util"
import { brotliCompress, constants, gzip } from "node:zlib"
import { HttpLayerRouter, HttpServerRequest, HttpServerResponse, OpenApi } from "@effect/platform"
import { Effect } from "effect"
import { MorselApi } from "./Api.ts"

/** JSON inside a `<script>` element: no `<` to end it, no line terminators a script cannot hold. */
const scriptJson = (value: unknown) =>
  JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"))

const html = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

const pageText = () => {
  const require = createRequire(import.meta.url)
  const { javascript } = require(join(dirname(require.resolve("@effect/platform/HttpApiScalar")), "internal/httpApiScalar.js")) as {
    readonly javascript: string
  }
  const spec = OpenApi.fromApi(MorselApi)
  return `<!doctype html>
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
</html>`
}

/** The page in each encoding a browser may take, and the tag of its content. */
interface Encoded {
  readonly identity: Uint8Array
  readonly gzip: Uint8Array
  readonly br: Uint8Array
  readonly etag: string
}

const gzipAsync = promisify(gzip)
const brotliAsync = promisify(brotliCompress)

/**
 * 3.3 MB become about 0.9 MB with gzip and 0.8 MB with brotli at quality 5 (quality 11 saves 0.1 MB more for
 * a hundred times the work, too much for one start on a small machine).
 */
const encode = Effect.promise(async (): Promise<Encoded> => {
  const identity = Buffer.from(pageText())
  const [zipped, brotli] = await Promise.all([
    gzipAsync(identity, { level: 9 }),
    brotliAsync(identity, { params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_SIZE_HINT]: identity.length } })
  ])
  return { identity, gzip: zipped, br: brotli, etag: `"${createHash("sha256").update(identity).digest("base64url").slice(0, 27)}"` }
})

/** The encodings Accept-Encoding allows (a q of 0 refuses one; `*` stands for the rest), best first. */
export const chooseEncoding = (accept: string | undefined): "br" | "gzip" | "identity" => {
  const weights = new Map<string, number>()
  for (const part of (accept ?? "").split(",")) {
    const [name = "", ...params] = part.trim().toLowerCase().split(";")
    const q = params.map((p) => /^\s*q=([\d.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined)
    if (name !== "") weights.set(name, q === undefined ? 1 : Number(q))
  }
  const weight = (name: string) => weights.get(name) ?? weights.get("*") ?? 0
  return weight("br") > 0 ? "br" : weight("gzip") > 0 ? "gzip" : "identity"
}

/** A release changes the page; within an hour a browser revalidates with its ETag and gets a 304. */
const CACHE_CONTROL = "public, max-age=3600"

const answer = (page: Encoded) =>
  Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
    const headers = { etag: page.etag, "cache-control": CACHE_CONTROL, vary: "Accept-Encoding" }
    const known = request.headers["if-none-match"]
    if (known?.split(",").some((tag) => tag.trim().replace(/^W\//, "") === page.etag)) {
      return HttpServerResponse.empty({ status: 304, headers })
    }
    const encoding = chooseEncoding(request.headers["accept-encoding"])
    return HttpServerResponse.uint8Array(page[encoding], {
      contentType: "text/html; charset=utf-8",
      headers: encoding === "identity" ? headers : { ...headers, "content-encoding": encoding }
    })
  })

export const DocsRoute = HttpLayerRouter.use((router) =>
  Effect.flatMap(Effect.cached(encode), (cached) => router.add("GET", "/docs", Effect.flatMap(cached, answer)))
)
