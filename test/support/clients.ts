/** Clients of a running test server: the official MCP SDK client (v2, and v1 for 2025-era agents), tool-result readers, REST calls, bought credit keys. */
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport as StreamableHTTPClientTransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js"
import { Effect } from "effect"
import { newCreditKey } from "../../src/credits/keys.ts"
import { type FakeStripe, startFakeStripe } from "./fakeStripe.ts"
import { isRecord, send } from "./http.ts"

/**
 * An MCP client (SDK v2) on `{url}/mcp` speaking the current revision (2026-07-28, found through `server/discover`),
 * closed with the scope; `headers` go on every HTTP request of the connection. It lists the tools first, as agents
 * do: from then on the SDK checks every structuredContent against the output schema.
 */
export const connect = (url: string, headers: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name: "morsel-test", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }))
      await client.listTools()
      return client
    }),
    (client) => Effect.promise(() => client.close())
  )

/** The same with the v1 SDK client (1.32), as 2025-era agents connect: `initialize` on protocol 2025-11-25. */
export const connectV1 = (url: string, headers: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new ClientV1({ name: "morsel-test-v1", version: "1.0.0" })
      await client.connect(new StreamableHTTPClientTransportV1(new URL(`${url}/mcp`), { requestInit: { headers } }))
      await client.listTools()
      return client
    }),
    (client) => Effect.promise(() => client.close())
  )

/** A JSON Schema 2020-12 validator (MCP's dialect), strict about keywords and types; formats are not the subject here. */
export const jsonSchemaValidator = () => new Ajv2020({ allErrors: true, strict: true, validateFormats: false })

const outputValidators = new WeakMap<Client, ValidateFunction>()

/** The validator of the output schema the server lists for analyze_food, compiled once per connection. */
const outputValidator = async (client: Client) => {
  const known = outputValidators.get(client)
  if (known) return known
  const { tools } = await client.listTools()
  const schema = tools.find((tool) => tool.name === "analyze_food")?.outputSchema
  if (!schema) throw new Error("analyze_food declares no output schema")
  const validate = jsonSchemaValidator().compile(schema)
  outputValidators.set(client, validate)
  return validate
}

/**
 * `tools/call analyze_food`, with an optional `_meta` (the x402 payment). Every result, success or error, is
 * checked against the tool's declared output schema, so each test of a result shape is a conformance test too.
 */
export const analyzeFood = (client: Client, args: Record<string, unknown>, meta?: Record<string, unknown>) =>
  Effect.promise(async () => {
    const result = (await client.callTool({ name: "analyze_food", arguments: args, ...(meta ? { _meta: meta } : {}) })) as CallToolResult
    const validate = await outputValidator(client)
    if (!validate(result.structuredContent)) {
      throw new Error(`structuredContent does not follow the output schema: ${JSON.stringify(validate.errors)}`)
    }
    return result
  })

/** `structuredContent.error.code` of a tool error. */
export const toolErrorCode = (result: CallToolResult): unknown => {
  const error = isRecord(result.structuredContent) ? result.structuredContent["error"] : undefined
  return isRecord(error) ? error["code"] : undefined
}

/** The JSON of the result's first text block. */
export const firstText = (result: CallToolResult): unknown => {
  const block = result.content[0]
  return block?.type === "text" ? JSON.parse(block.text) : undefined
}

/** REST calls next to the MCP ones (credits, replays over REST). */
export const rest = (url: string, path: string, key: string | undefined, body?: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    send(`${url}${path}`, {
      headers: { ...(key === undefined ? {} : { authorization: `Bearer ${key}` }), ...headers },
      ...(body === undefined ? {} : { body })
    })
  )

/** A new test-mode key holding `credits` (0 or 500), bought through checkout, the fake processor and confirm. */
export const keyWith = (url: string, stripe: FakeStripe, credits: 0 | 500) =>
  Effect.gen(function* () {
    const key = newCreditKey(true)
    const checkout = yield* rest(url, "/v1/credits/checkout", key, { order_id: crypto.randomUUID() })
    const sessionId = isRecord(checkout.body) ? checkout.body["session_id"] : undefined
    if (typeof sessionId !== "string") throw new Error(`checkout failed: ${checkout.text}`)
    if (credits === 500) {
      stripe.pay(sessionId)
      const confirmed = yield* rest(url, "/v1/credits/confirm", key, { session_id: sessionId })
      if (!isRecord(confirmed.body) || confirmed.body["credits_remaining"] !== 500) throw new Error(`confirm failed: ${confirmed.text}`)
    }
    return key
  })

export const balanceOf = (url: string, key: string) =>
  Effect.map(rest(url, "/v1/credits/balance", key), (answer) => (isRecord(answer.body) ? answer.body["credits_remaining"] : answer.text))

/** The fake Stripe for the scope of a test server. */
export const fakeStripe = Effect.acquireRelease(
  Effect.promise(() => startFakeStripe()),
  (fake) => Effect.promise(() => fake.close())
)
