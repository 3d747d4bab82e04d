/** The web page at `/`: static HTML, CSS and script served by the service itself, also as the checkout return page. */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"

/** The assets sit beside this module in the source tree; the bundle (dist/bundle) and the compiled module (dist/src/web) read them there. */
const staticDir = (): string => {
  const candidates = ["./static/", "../../src/web/static/", "../../../src/web/static/"].map((path) =>
    fileURLToPath(new URL(path, import.meta.url))
  )
  return candidates.find((dir) => existsSync(dir)) ?? candidates[0]!
}

/** Nothing but the service's own origin: no CDN, no framing, no inline script. */
/** The browser build of `morsel/client` (bin/bundle-client.js), from the source tree, the compiled module or the bundle. */
const clientDir = (): string | undefined =>
  ["../../dist/client/browser/", "../../client/browser/", "../client/browser/"]
    .map((path) => fileURLToPath(new URL(path, import.meta.url)))
    .find((dir) => existsSync(dir))

/** `/client/<file>` for each module of the client's browser build, so a page loads it from this server, not another origin. */
const clientRoutes = () => {
  const dir = clientDir()
  if (dir === undefined) return Layer.empty
  return Layer.mergeAll(
    Layer.empty,
    ...readdirSync(dir)
      .filter((file) => file.endsWith(".js"))
      .map((file) => {
        const body = readFileSync(`${dir}${file}`)
        return HttpLayerRouter.add("GET", `/client/${file}`, Effect.sync(() => HttpServerResponse.uint8Array(body, { contentType: "text/javascript; charset=utf-8", headers: SECURITY_HEADERS })))
      })
  )
}

const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'self'; img-src 'self' blob: data:; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache"
}

const asset = (file: string, contentType: string) => {
  const body = readFileSync(`${staticDir()}${file}`)
  return Effect.sync(() => HttpServerResponse.uint8Array(body, { contentType, headers: SECURITY_HEADERS }))
}

/** `/` and the checkout return pages (the page confirms the purchase), plus the page's script modules, style sheet and icon. */
export const WebRoute = Layer.unwrapEffect(
  Effect.sync(() => {
    const page = asset("index.html", "text/html; charset=utf-8")
    return Layer.mergeAll(
      HttpLayerRouter.add("GET", "/", page),
      HttpLayerRouter.add("GET", "/checkout/success", page),
      HttpLayerRouter.add("GET", "/checkout/cancel", page),
      HttpLayerRouter.add("GET", "/app.js", asset("app.js", "text/javascript; charset=utf-8")),
      HttpLayerRouter.add("GET", "/result.js", asset("result.js", "text/javascript; charset=utf-8")),
      HttpLayerRouter.add("GET", "/photo.js", asset("photo.js", "text/javascript; charset=utf-8")),
      HttpLayerRouter.add("GET", "/correct.js", asset("correct.js", "text/javascript; charset=utf-8")),
      HttpLayerRouter.add("GET", "/more.js", asset("more.js", "text/javascript; charset=utf-8")),
      HttpLayerRouter.add("GET", "/words.js", asset("words.js", "text/javascript; charset=utf-8")),
      HttpLayerRouter.add("GET", "/app.css", asset("app.css", "text/css; charset=utf-8")),
      // Browsers ask for /favicon.ico on their own; both names get the one drawing.
      HttpLayerRouter.add("GET", "/favicon.svg", asset("favicon.svg", "image/svg+xml")),
      HttpLayerRouter.add("GET", "/favicon.ico", asset("favicon.svg", "image/svg+xml")),
      clientRoutes()
    )
  })
)
