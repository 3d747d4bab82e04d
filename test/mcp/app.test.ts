// The MCP App's HTML as the server builds it, without a browser: its one inline script must parse, or the card shows
// nothing and never answers its host.
import { describe, expect, it } from "@effect/vitest"
import { transform } from "esbuild"
import { appHtml } from "../../src/mcp/app.ts"

describe("the MCP App's HTML", () => {
  it("inlines the page's style sheet, result view and modules into one script that parses", async () => {
    const html = appHtml()
    expect(html).not.toMatch(/\/\*STYLE\*\/|\/\*SCRIPT\*\/|<!--RESULT-->/)
    expect(html).toContain('<section id="result"')
    expect(html).toContain('<tbody id="rows">')
    expect(html).toContain('class="disclaimer"')
    expect(html).toMatch(/<input id="photo"[^>]* accept="image\/\*"/)
    const scripts = [...html.matchAll(/<script type="module">([\s\S]*?)<\/script>/g)].map((match) => match[1] ?? "")
    expect(scripts).toHaveLength(1)
    // A module of the page inlined with an `export` left in it is a syntax error that stops the whole card.
    await expect(transform(scripts[0]!, { loader: "js", format: "esm", target: "es2022" })).resolves.toBeDefined()
  })
})
