// The server.json for the MCP registry: valid against the registry's published schema, and true of the running server.
import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { Ajv } from "ajv"
import { Effect, Layer } from "effect"
import { chickenRice } from "../support/meals.ts"
import packageJson from "../../package.json" with { type: "json" }
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import { FoodDbEmpty } from "../../src/foods/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { send } from "../support/http.ts"
import { startServer } from "../support/server.ts"

const readJson = (path: string): unknown => JSON.parse(readFileSync(new URL(path, import.meta.url), "utf8"))

/** The registry's schema (2025-09-29, draft-07), vendored: its OpenAPI-only keywords ("example", "discriminator") are not checked. */
const schema = readJson("./vendor/server.schema.json")
const serverJson = readJson("../../server.json") as {
  name: string
  version: string
  icons: Array<{ src: string }>
  remotes: Array<{ type: string; url: string; headers: Array<{ name: string; isRequired: boolean; isSecret: boolean }> }>
}

const vision = Layer.succeed(VisionModel, { model: "scripted", analyze: () => Effect.succeed(chickenRice) })

describe("server.json", () => {
  it("follows the registry's published schema", () => {
    const validate = new Ajv({ allErrors: true, strict: false, validateFormats: false }).compile(schema as object)
    expect(validate(serverJson), JSON.stringify(validate.errors)).toBe(true)
    // The same schema refuses what the registry refuses.
    expect(validate({ ...serverJson, name: "morsel" })).toBe(false)
    expect(validate({ ...serverJson, description: "x".repeat(101) })).toBe(false)
  })

  it("describes this release: a remote streamable-http /mcp with an optional secret Authorization header, https icons", () => {
    expect(serverJson.version).toBe(packageJson.version)
    expect(serverJson.remotes).toEqual([
      expect.objectContaining({
        type: "streamable-http",
        url: expect.stringMatching(/^https:\/\/[^/]+\/mcp$/),
        headers: [expect.objectContaining({ name: "Authorization", isRequired: false, isSecret: true })]
      })
    ])
    for (const icon of serverJson.icons) expect(new URL(icon.src).protocol).toBe("https:")
  })

  it.scoped("the icon it names is served by the server at that path", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies: Layer.mergeAll(vision, FoodDbEmpty, FundingMemory({}), LimitsUnlimited) })
      const path = new URL(serverJson.icons[0]!.src).pathname
      const icon = yield* Effect.promise(() => send(`${url}${path}`))
      expect(icon.status).toBe(200)
      expect(icon.headers.get("content-type")).toContain("image/svg+xml")
      expect(icon.text).toMatch(/^<svg /)
    }), 120_000)
})
