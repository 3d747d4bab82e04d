// The MCP App's HTML as the server builds it and serves it, without a browser: its one inline script must parse, or
// the card shows nothing and never answers its host.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { transform } from "esbuild"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { APP_URI, appHtml } from "../../src/mcp/app.ts"
import { connect } from "../support/clients.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const vision = Layer.succeed(VisionModel, { model: "fake-vision-1", analyze: () => Effect.succeed(chickenRice) })

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

  it("carries the corrections: the food search, the hand-over button and their script, with no form (hosts sandbox the card without allow-forms)", () => {
    const html = appHtml()
    const corrections = /<div id="corrections"[\s\S]*?<p id="correction-status"/.exec(html)?.[0] ?? ""
    expect(corrections).toMatch(/<input id="swap-query" type="search"/)
    expect(corrections).toMatch(/<button id="use-corrected" type="button" disabled>Use corrected meal<\/button>/)
    // The one form is the photo's, never submitted (a picked photo starts the analysis).
    const markup = html.replace(/<script[\s\S]*?<\/script>/g, "")
    expect([...markup.matchAll(/<form\b[^>]*>/g)].map((match) => match[0])).toEqual(['<form id="analyze-form" novalidate>'])
    for (const name of ["makeCorrections", "correctedMeal", "contextOf", "messageOf"]) expect(html).toContain(`function ${name}(`)
    expect(html).toContain('name: "food_nutrition"')
    expect(html).toContain('name: "search_foods"')
  })

  it.scoped("is served by resources/read as built", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies: Layer.mergeAll(vision, FoodDbEmpty, FundingMemory({}), LimitsUnlimited) })
      const mcp = yield* connect(url)
      const { contents } = yield* Effect.promise(() => mcp.readResource({ uri: APP_URI }))
      expect(contents).toEqual([{ uri: APP_URI, mimeType: "text/html;profile=mcp-app", text: appHtml() }])
    }), 60_000)
})
