// The server.json for the MCP registry: valid against the schema the registry's publisher takes today, within the
// rules it enforces beyond the schema, and true of the running server.
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { Ajv } from "ajv"
import { Effect, Layer } from "effect"
import { chickenRice } from "../support/meals.ts"
import packageJson from "../../package.json" with { type: "json" }
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModel } from "../../src/analysis/VisionModel.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { connect } from "../support/clients.ts"
import { send } from "../support/http.ts"
import { startServer } from "../support/server.ts"

const SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
/** modelcontextprotocol/registry, internal/validators/schemas/2025-12-11.json, byte for byte. */
const SCHEMA_SHA256 = "d4c163f299ece68b7432f4e44c4108f2fdb663d99dc088c8344142e5b0a4b520"

const schemaBytes = readFileSync(new URL("./vendor/server.schema.2025-12-11.json", import.meta.url))
const schema = JSON.parse(schemaBytes.toString("utf8")) as { $id: string }

interface ServerJson {
  $schema: string
  name: string
  description: string
  version: string
  title?: string
  websiteUrl?: string
  icons: Array<{ src: string }>
  remotes: Array<{ type: string; url: string; headers: Array<{ name: string; isRequired: boolean; isSecret: boolean }> }>
  _meta: { "io.modelcontextprotocol.registry/publisher-provided": { tools: Array<{ name: string; price: string }> } }
}
const serverJson = JSON.parse(readFileSync(new URL("../../server.json", import.meta.url), "utf8")) as ServerJson

/** The schema (draft-07); its OpenAPI-only keywords ("example") are not checked. */
const validate = new Ajv({ allErrors: true, strict: false, validateFormats: false }).compile(schema)

const https = (value: string): boolean => {
  try {
    return new URL(value).protocol === "https:"
  } catch {
    return false
  }
}

/**
 * What the publisher refuses beyond the schema (the registry's internal/validators: parseServerName, validateVersion,
 * validateWebsiteURL, validateIcon, IsValidRemoteURL, validatePublisherExtensions), and which namespaces a publisher
 * may publish under (GitHub login: io.github.<user>/…; a proven domain: its reverse-DNS name).
 */
const publisherRefusals = (entry: ServerJson): Array<string> => {
  const refusals: Array<string> = []
  if (entry.$schema !== SCHEMA_URL) refusals.push(`$schema is not the current ${SCHEMA_URL}`)
  const part = "[a-zA-Z0-9][a-zA-Z0-9.-]*[a-zA-Z0-9]"
  if (!new RegExp(`^${part}/[a-zA-Z0-9][a-zA-Z0-9._-]*[a-zA-Z0-9]$`).test(entry.name)) refusals.push("name is not namespace/name")
  const namespace = entry.name.split("/")[0] ?? ""
  const servedFrom = entry.remotes.map((remote) => URL.canParse(remote.url) ? new URL(remote.url).hostname.split(".").reverse().join(".") : "")
  if (!namespace.startsWith("io.github.") && !servedFrom.some((reversed) => namespace === reversed || namespace.startsWith(`${reversed}.`) || reversed.startsWith(`${namespace}.`)))
    refusals.push("the namespace is neither io.github.<user> nor the reverse-DNS name of the domain the server is served from")
  if (entry.version === "latest" || /^\s*(\^|~|>=|<=|>|<|=)|\|\||\s-\s|(^|\.)(x|X|\*)(\.|$)/.test(entry.version)) refusals.push("version is a range or latest")
  if ([...entry.description].length > 100) refusals.push("description over 100 characters")
  if (entry.title !== undefined && entry.title.trim() === "") refusals.push("title is blank")
  if (entry.websiteUrl !== undefined && !https(entry.websiteUrl)) refusals.push("websiteUrl is not https")
  for (const icon of entry.icons) if (!https(icon.src)) refusals.push(`icon ${icon.src} is not https`)
  for (const remote of entry.remotes) {
    const host = URL.canParse(remote.url) ? new URL(remote.url).hostname : ""
    if (!https(remote.url) || host === "localhost" || host === "127.0.0.1" || host.endsWith(".localhost") || /\{[^}]*\}/.test(remote.url))
      refusals.push(`remote ${remote.url} is not a public https URL`)
    for (const header of remote.headers) if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(header.name)) refusals.push(`header ${header.name} is not a header name`)
  }
  if (JSON.stringify(entry._meta["io.modelcontextprotocol.registry/publisher-provided"]).length > 4096) refusals.push("publisher-provided _meta over 4 KB")
  return refusals
}

const vision = Layer.succeed(VisionModel, { model: "scripted", analyze: () => Effect.succeed(chickenRice) })

describe("server.json", () => {
  it("the vendored schema is the registry's 2025-12-11 schema, byte for byte", () => {
    expect(createHash("sha256").update(schemaBytes).digest("hex")).toBe(SCHEMA_SHA256)
    expect(schema.$id).toBe(SCHEMA_URL)
    expect(serverJson.$schema).toBe(SCHEMA_URL)
  })

  it("follows the schema, and the schema refuses what the registry refuses", () => {
    expect(validate(serverJson), JSON.stringify(validate.errors)).toBe(true)
    expect(validate({ ...serverJson, name: "morsel" })).toBe(false)
    expect(validate({ ...serverJson, description: "x".repeat(101) })).toBe(false)
    expect(validate({ ...serverJson, remotes: [{ ...serverJson.remotes[0], url: "ftp://morsel.example.com/mcp" }] })).toBe(false)
  })

  it("passes the publisher's rules beyond the schema, which refuse the usual mistakes", () => {
    expect(publisherRefusals(serverJson)).toEqual([])
    const remote = serverJson.remotes[0]!
    const refused = (change: Partial<ServerJson>) => publisherRefusals({ ...serverJson, ...change })
    expect(refused({ $schema: "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json" })).toHaveLength(1)
    expect(refused({ name: "com.example.morsel/morsel/v2" })).toHaveLength(1)
    expect(refused({ name: "org.other/morsel" })).toHaveLength(1)
    expect(refused({ name: "io.github.someone/morsel" })).toEqual([])
    expect(refused({ version: "^0.1.0" })).toHaveLength(1)
    expect(refused({ version: "latest" })).toHaveLength(1)
    expect(refused({ remotes: [{ ...remote, url: "http://morsel.example.com/mcp" }] })).toHaveLength(1)
    expect(refused({ remotes: [{ ...remote, url: "https://localhost/mcp" }] })).toHaveLength(2)
    expect(refused({ icons: [{ src: "data:image/svg+xml;base64,PHN2Zz4=" }] })).toHaveLength(1)
    expect(refused({ remotes: [{ ...remote, headers: [{ name: "Bad Header", isRequired: false, isSecret: true }] }] })).toHaveLength(1)
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
  })

  it.scoped("the icon it names is served, and every tool the server lists is described with its price", () =>
    Effect.gen(function* () {
      const { url } = yield* startServer({ dependencies: Layer.mergeAll(vision, FoodDbEmpty, FundingMemory({}), LimitsUnlimited) })
      const path = new URL(serverJson.icons[0]!.src).pathname
      const icon = yield* Effect.promise(() => send(`${url}${path}`))
      expect(icon.status).toBe(200)
      expect(icon.headers.get("content-type")).toContain("image/svg+xml")
      expect(icon.text).toMatch(/^<svg /)

      const described = serverJson._meta["io.modelcontextprotocol.registry/publisher-provided"].tools
      expect(described.map((tool) => tool.name)).toEqual(["analyze_food", "search_foods", "food_nutrition"])
      const mcp = yield* connect(url)
      const { tools } = yield* Effect.promise(() => mcp.listTools())
      for (const tool of tools) {
        const entry = described.find((candidate) => candidate.name === tool.name)
        expect(entry, `${tool.name} is described in server.json`).toBeDefined()
        // The paid tool says so in its description; the free ones are read-only.
        if (entry?.price === "free") expect(tool.annotations?.readOnlyHint).toBe(true)
        else expect(tool.description).toContain("0.01 USDC")
      }
    }), 120_000)
})
