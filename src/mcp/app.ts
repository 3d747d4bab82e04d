/** The MCP App of analyze_food (extension io.modelcontextprotocol/ui): one HTML resource that shows a result as the web page does, corrects it and takes a photo. */
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import { RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/server"

export const APP_URI = "ui://morsel/card.html"
export { RESOURCE_MIME_TYPE as APP_MIME_TYPE }

/** The first folder that exists: beside this module in the source tree, or from the bundle (dist/bundle) and the compiled module (dist/src/mcp). */
const folder = (candidates: ReadonlyArray<string>): string => {
  const dirs = candidates.map((path) => fileURLToPath(new URL(path, import.meta.url)))
  return dirs.find((dir) => existsSync(dir)) ?? dirs[0]!
}

const read = (dir: string, file: string) => readFileSync(`${dir}${file}`, "utf8")

/**
 * The App SDK (its self-contained build) as a function returning its App class: the build ends in an ES `export`
 * clause, which an inline script cannot use, so the clause becomes the function's return.
 */
const appClassOf = (bundle: string): string => {
  const clause = bundle.lastIndexOf("export{")
  const local = /([\w$]+) as App\b/.exec(bundle.slice(clause))?.[1]
  if (clause < 0 || local === undefined) throw new Error("@modelcontextprotocol/ext-apps: its app build exports no App")
  return `(() => {\n${bundle.slice(0, clause)}\nreturn ${local}\n})()`
}

/**
 * Exported functions of a web page module, as an expression giving them by name: the module in a scope of its own,
 * every `export` before a declaration dropped (an inline script is no module, and any `export` left is a syntax error
 * that stops the whole card), its imports and other export forms refused.
 */
const exported = (module: string, names: ReadonlyArray<string>): string => {
  const local = module.replace(/^export (?=(?:async )?function[\s*]|const |let |class )/gm, "")
  const left = /^\s*(?:export|import)\b.*$/m.exec(local)?.[0]
  if (left !== undefined) throw new Error(`the web page's module has what a card cannot inline: ${left.trim()}`)
  for (const name of names) {
    if (!new RegExp(`^export (?:async )?function ${name}\\b`, "m").test(module)) throw new Error(`the web page's module exports no ${name}`)
  }
  return `(() => {\n${local}\nreturn { ${names.join(", ")} }\n})()`
}

/** The web page's result view (its `<section id="result">`) without the page's own editor, for the card to show a result as the page does. */
const resultSection = (page: string): string => {
  const start = page.indexOf('<section id="result"')
  const end = page.indexOf("</section>", start)
  if (start < 0 || end < 0) throw new Error("the web page has no result section")
  return page.slice(start, end + "</section>".length).replace(/<!--page-only[\s\S]*?<!--\/page-only-->\s*/g, "")
}

/** The App's HTML: the web page's style sheet and result view, the App SDK, and the card's own scripts (what it hands the model, its corrections, the card), all inline. */
export const appHtml = (): string => {
  const own = folder(["./app/", "../../src/mcp/app/", "../../../src/mcp/app/"])
  const web = folder(["../web/static/", "../../src/web/static/", "../../../src/web/static/"])
  const sdk = readFileSync(createRequire(import.meta.url).resolve("@modelcontextprotocol/ext-apps/app-with-deps"), "utf8")
  // Each part in its own function scope: the minified SDK's names and the page's cannot collide.
  const script = [
    `const McpApp = ${appClassOf(sdk)}`,
    `const { render, clear } = ${exported(read(web, "result.js"), ["render", "clear"])}`,
    `const { preparePhoto } = ${exported(read(web, "photo.js"), ["preparePhoto"])}`,
    `const { correctedMeal, contextOf, messageOf } = ${exported(read(own, "handover.js"), ["correctedMeal", "contextOf", "messageOf"])}`,
    `const { makeCorrections } = ${exported(read(own, "corrections.js"), ["makeCorrections"])}`,
    read(own, "card.js")
  ].join("\n")
  return read(own, "card.html")
    .replace("<!--RESULT-->", () => resultSection(read(web, "index.html")))
    .replace("/*STYLE*/", () => read(web, "app.css"))
    .replace("/*SCRIPT*/", () => script)
}
