// The tool interface at /mcp paid per call with x402 (v2 MCP transport) on the memory chain: the official MCP and x402 clients.
import { describe, expect, layer } from "@effect/vitest"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import type { PaymentRequired as X402PaymentRequired } from "@x402/core/types"
import {
  type DiscoveryExtension,
  extractDiscoveryInfo,
  sanitizeResourceServiceMetadata,
  validateDiscoveryExtension,
  validateDiscoveryExtensionSpec
} from "@x402/extensions/bazaar"
import { Context, Effect, Either, Fiber, Layer, Schema } from "effect"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { AnalysisResult, AnalyzeRequest } from "../../src/domain/schemas.ts"
import { FundingLive } from "../../src/server.ts"
import { MemoryChain } from "../../src/x402/MemoryChain.ts"
import { memorySeam, type PaymentChain, TestChain } from "../support/memoryChain.ts"
import { type FakeOpenAI, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import type { FakeStripe } from "../support/fakeStripe.ts"
import { isRecord, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"
import { challengeOf, signPayment, withBrokenSignature, x402Env } from "../support/x402.ts"
import { analyzeFood, balanceOf, connect, connectV1, fakeStripe, firstText, jsonSchemaValidator, keyWith, rest, toolErrorCode } from "../support/clients.ts"

const PRICE = 10_000n

class Service extends Context.Tag("test/McpX402Service")<
  Service,
  {
    readonly url: string
    readonly model: FakeOpenAI
    readonly chain: PaymentChain
    readonly stripe: FakeStripe
    readonly memoryChain: MemoryChain["Type"]
  }
>() {}

const ServiceLive = Layer.scoped(
  Service,
  Effect.gen(function* () {
    const chain = yield* TestChain
    const stripe = yield* fakeStripe
    const model = yield* startFakeOpenAI()
    const { url } = yield* startServer({
      env: { ...x402Env(chain), ...stripe.env, OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: model.url, VISION_MODEL: "fake-vision-1" },
      dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited),
      chain: yield* memorySeam
    })
    return { url, model, chain, stripe, memoryChain: yield* MemoryChain }
  })
).pipe(Layer.provide(TestChain.memory({ payers: 5 })))

const photo = await makeImage(640, 480, "jpeg")
const image = { image_base64: photo.base64, mime_type: photo.mime }

const anonymous = Effect.flatMap(Service, ({ url }) => connect(url))

/** The challenge an unpaid call returns. */
const challengeFor = (idempotencyKey: string) =>
  Effect.gen(function* () {
    const mcp = yield* anonymous
    const unpaid = yield* analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey })
    expect(unpaid.isError).toBe(true)
    // Read back through the official decoder, which also checks the shape.
    return challengeOf(Buffer.from(JSON.stringify(unpaid.structuredContent)).toString("base64"))
  })

const transfersFrom = (i: number) =>
  Effect.flatMap(Service, ({ chain }) => Effect.promise(() => chain.transfers(chain.accounts.payers[i]!.address, chain.accounts.payTo.address)))

const sign = (i: number, challenge: X402PaymentRequired) =>
  Effect.flatMap(Service, ({ chain }) => Effect.promise(() => signPayment(chain.accounts.payers[i]!, challenge)))

describe("MCP tool interface paid with x402", () => {
  // The server and the chain run on the real clock.
  layer(ServiceLive, { excludeTestServices: true })("on the memory chain", (it) => {
    it.scoped("without payment: isError with the x402 PaymentRequired (accepts) as structuredContent and first text; nothing runs", () =>
      Effect.gen(function* () {
        const { chain, model } = yield* Service
        const mcp = yield* anonymous
        const unpaid = yield* analyzeFood(mcp, { ...image, idempotency_key: "mcp-x402-unpaid-00001" })
        expect(unpaid.isError).toBe(true)
        expect(unpaid.structuredContent).toMatchObject({
          x402Version: 2,
          accepts: [{ scheme: "exact", network: "eip155:8453", amount: "10000", payTo: chain.accounts.payTo.address }]
        })
        // x402's MCP transport: the first text wraps the same challenge in "x402/error".
        expect(firstText(unpaid)).toEqual({ "x402/error": { code: 402, message: expect.stringContaining("0.01 USDC"), data: unpaid.structuredContent } })
        const second = unpaid.content[1]
        expect(second?.type === "text" && JSON.parse(second.text)).toMatchObject({ error: { code: "payment_required" } })
        // In the tool's own words: no HTTP header an MCP caller never sees.
        expect(JSON.stringify(unpaid.content)).not.toMatch(/PAYMENT-REQUIRED|PAYMENT-SIGNATURE|Idempotency-Key/)
        // Invalid input is refused before any price is asked (as on REST).
        const invalid = yield* analyzeFood(mcp, { ...image, mime_type: "image/gif", idempotency_key: "mcp-x402-unpaid-00002" })
        expect(toolErrorCode(invalid)).toBe("invalid_request")
        expect(model.requests).toHaveLength(0)
      }))

    it.scoped("paying through _meta: one transfer of 10000, the receipt in _meta; the same call again replays without paying", () =>
      Effect.gen(function* () {
        const { model } = yield* Service
        const mcp = yield* anonymous
        const idempotencyKey = "mcp-x402-paid-000001"
        const payment = yield* sign(0, yield* challengeFor(idempotencyKey))
        const before = model.requests.length
        model.enqueue(Reply.answer(chickenRice))
        const paid = yield* analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey }, { "x402/payment": payment })
        expect(paid.isError ?? false, JSON.stringify(paid.structuredContent)).toBe(false)
        expect(paid.structuredContent).toMatchObject({ dish_name: "Grilled chicken with rice", estimate: true })
        expect(firstText(paid)).toEqual(paid.structuredContent)
        const receipt = paid._meta?.["x402/payment-response"]
        expect(receipt).toMatchObject({ success: true, network: "eip155:8453", transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) })
        const transaction = isRecord(receipt) ? receipt["transaction"] : undefined
        expect(yield* transfersFrom(0)).toEqual([{ transactionHash: transaction, value: PRICE }])

        const replay = yield* analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey }, { "x402/payment": payment })
        expect(replay.structuredContent).toEqual(paid.structuredContent)
        expect(replay._meta?.["x402/payment-response"]).toEqual(receipt)
        expect(yield* transfersFrom(0)).toHaveLength(1)
        expect(model.requests.length - before).toBe(1)

        // The same authorization for another request: refused, nothing served.
        const reused = yield* analyzeFood(mcp, { ...image, idempotency_key: "mcp-x402-paid-000002" }, { "x402/payment": payment })
        expect([reused.isError, toolErrorCode(reused)]).toEqual([true, "authorization_reused"])
        expect(JSON.stringify(reused.structuredContent)).toContain("idempotency_key")
        expect(JSON.stringify(reused.content)).not.toMatch(/Idempotency-Key|PAYMENT-SIGNATURE/)
        expect(model.requests.length - before).toBe(1)
      }))

    it.scoped("an invalid payment: a fresh challenge with invalid_payment, no model call, nothing moves", () =>
      Effect.gen(function* () {
        const { model } = yield* Service
        const mcp = yield* anonymous
        const idempotencyKey = "mcp-x402-invalid-0001"
        const payment = withBrokenSignature(yield* sign(1, yield* challengeFor(idempotencyKey)))
        const before = model.requests.length
        const refused = yield* analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey }, { "x402/payment": payment })
        expect(refused.isError).toBe(true)
        expect(refused.structuredContent).toMatchObject({ x402Version: 2, accepts: [{ amount: "10000" }] })
        const second = refused.content[1]
        expect(second?.type === "text" && JSON.parse(second.text)).toMatchObject({ error: { code: "invalid_payment" } })
        const garbage = yield* analyzeFood(mcp, { ...image, idempotency_key: "mcp-x402-invalid-0002" }, { "x402/payment": "not a payload" })
        expect(garbage.structuredContent).toHaveProperty("accepts")
        expect(model.requests.length).toBe(before)
        expect(yield* transfersFrom(1)).toEqual([])
      }))

    it.scoped("a Bearer key without credits: insufficient_credits with the x402 challenge, so the agent may pay per call instead", () =>
      Effect.gen(function* () {
        const { model, stripe, url } = yield* Service
        const key = yield* keyWith(url, stripe, 0)
        const before = model.requests.length
        const broke = yield* analyzeFood(yield* connect(url, { authorization: `Bearer ${key}` }), { ...image, idempotency_key: "mcp-x402-broke-00001" })
        expect(broke.isError).toBe(true)
        expect(broke.structuredContent).toMatchObject({ x402Version: 2, accepts: [{ amount: "10000" }] })
        const second = broke.content[1]
        expect(second?.type === "text" && JSON.parse(second.text)).toMatchObject({ error: { code: "insufficient_credits" } })
        expect(yield* balanceOf(url, key)).toBe(0)
        expect(model.requests.length).toBe(before)
      }))

    it.scoped("settlement unconfirmed: isError payment_pending with the pending receipt and no accepts; the identical retry settles once", () =>
      Effect.gen(function* () {
        const { chain, model } = yield* Service
        const mcp = yield* anonymous
        const idempotencyKey = "mcp-x402-pending-0001"
        const payment = yield* sign(2, yield* challengeFor(idempotencyKey))
        const before = model.requests.length
        model.enqueue(Reply.answer(chickenRice))
        yield* Effect.promise(() => chain.pauseMining())
        const pending = yield* Effect.ensuring(
          analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey }, { "x402/payment": payment }),
          Effect.promise(() => chain.resumeMining())
        )
        expect([pending.isError, toolErrorCode(pending)]).toEqual([true, "payment_pending"])
        expect(pending.structuredContent).not.toHaveProperty("accepts")
        expect(pending.structuredContent).toMatchObject({
          retry_after_seconds: 60,
          payment_response: { success: false, errorReason: "settlement_pending" }
        })
        expect(pending._meta?.["x402/payment-response"]).toEqual(isRecord(pending.structuredContent) && pending.structuredContent["payment_response"])

        const retried = yield* analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey }, { "x402/payment": payment })
        expect(retried.isError ?? false, JSON.stringify(retried.structuredContent)).toBe(false)
        const receipt = retried._meta?.["x402/payment-response"]
        expect(receipt).toMatchObject({ success: true })
        const transaction = isRecord(receipt) ? receipt["transaction"] : undefined
        expect(yield* transfersFrom(2)).toEqual([{ transactionHash: transaction, value: PRICE }])
        expect(model.requests.length - before).toBe(1)
      }))

    it.scoped("a settlement that fails for good: only the payment error (a fresh challenge and the failed receipt), never the analysis; nothing moves", () =>
      Effect.gen(function* () {
        const { chain, memoryChain, model } = yield* Service
        const mcp = yield* anonymous
        const idempotencyKey = "mcp-x402-failed-00001"
        const payment = yield* sign(4, yield* challengeFor(idempotencyKey))
        const before = model.requests.length
        model.pause()
        model.enqueue(Reply.answer(chickenRice))
        const call = yield* Effect.fork(analyzeFood(mcp, { ...image, idempotency_key: idempotencyKey }, { "x402/payment": payment }))
        // Verified and analysing: the payer empties the wallet before the transfer is sent.
        yield* model.awaitRequests(before + 1)
        yield* memoryChain.setBalance(chain.accounts.payers[4]!.address, 0n)
        model.resume()
        const failed = yield* Fiber.join(call)
        expect(failed.isError).toBe(true)
        expect(failed.structuredContent).toMatchObject({
          x402Version: 2,
          accepts: [{ amount: "10000" }],
          error: expect.stringContaining("could not be settled"),
          "x402/payment-response": { success: false, transaction: "", network: "eip155:8453" }
        })
        expect(failed._meta?.["x402/payment-response"]).toMatchObject({ success: false })
        expect(firstText(failed)).toMatchObject({ "x402/error": { code: 402, data: failed.structuredContent } })
        // Nothing of the analysis reaches the caller: the challenge and the payment error, no result.
        expect(failed.structuredContent).not.toHaveProperty("items")
        expect(failed.content.map((block) => (block.type === "text" ? Object.keys(JSON.parse(block.text)) : []))).toEqual([["x402/error"], ["error"]])
        expect(failed.content[1]?.type === "text" && JSON.parse(failed.content[1].text)).toMatchObject({ error: { code: "invalid_payment" } })
        expect(yield* transfersFrom(4)).toEqual([])
      }))

    it.scoped("a 2025-era agent (v1 SDK client) lists the tool and calls it paying with a credit key and with x402 in _meta", () =>
      Effect.gen(function* () {
        const { model, stripe, url } = yield* Service
        const key = yield* keyWith(url, stripe, 500)
        const withKey = yield* connectV1(url, { authorization: `Bearer ${key}` })
        expect(withKey.getServerVersion()).toMatchObject({ name: "morsel" })
        const { tools } = yield* Effect.promise(() => withKey.listTools())
        expect(tools.map((t) => t.name)).toEqual(["analyze_food", "search_foods", "food_nutrition"])
        model.enqueue(Reply.answer(chickenRice), Reply.answer(chickenRice))
        const credited = yield* Effect.promise(() =>
          withKey.callTool({ name: "analyze_food", arguments: { ...image, idempotency_key: "mcp-v1-credit-000001" } })
        )
        expect(credited.isError ?? false).toBe(false)
        expect(credited.structuredContent).toMatchObject({ dish_name: "Grilled chicken with rice" })
        expect(yield* balanceOf(url, key)).toBe(499)

        const anonymousV1 = yield* connectV1(url)
        const unpaid = yield* Effect.promise(() =>
          anonymousV1.callTool({ name: "analyze_food", arguments: { ...image, idempotency_key: "mcp-v1-x402-0000001" } })
        )
        expect(unpaid.isError).toBe(true)
        const challenge = challengeOf(Buffer.from(JSON.stringify(unpaid.structuredContent)).toString("base64"))
        const payment = yield* sign(3, challenge)
        const paid = yield* Effect.promise(() =>
          anonymousV1.callTool({
            name: "analyze_food",
            arguments: { ...image, idempotency_key: "mcp-v1-x402-0000001" },
            _meta: { "x402/payment": payment }
          })
        )
        expect(paid.isError ?? false, JSON.stringify(paid.structuredContent)).toBe(false)
        expect(paid._meta?.["x402/payment-response"]).toMatchObject({ success: true })
        expect(yield* transfersFrom(3)).toEqual([{ transactionHash: expect.any(String), value: PRICE }])
      }))

    it.scoped("handshake on protocol 2025-11-25 with instructions on paying, ping, and the tool's annotations", () =>
      Effect.gen(function* () {
        const { url } = yield* Service
        const initialize = yield* Effect.promise(() =>
          send(`${url}/mcp`, {
            headers: { accept: "application/json, text/event-stream" },
            body: {
              jsonrpc: "2.0",
              id: 1,
              method: "initialize",
              params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
            }
          })
        )
        expect(initialize.status).toBe(200)
        expect(initialize.body).toMatchObject({
          jsonrpc: "2.0",
          id: 1,
          result: { protocolVersion: "2025-11-25", serverInfo: { name: "morsel" }, capabilities: { tools: {} } }
        })

        const mcp = yield* connectV1(url)
        expect(yield* Effect.promise(() => mcp.ping())).toEqual({})
        const instructions = mcp.getInstructions() ?? ""
        for (const fact of ["0.01 USDC", "one prepaid credit", "Authorization: Bearer", 'params._meta["x402/payment"]', "cost nothing", "500 for USD 5.00"]) {
          expect(instructions).toContain(fact)
        }
        const { tools } = yield* Effect.promise(() => mcp.listTools())
        expect(tools[0]).toMatchObject({
          name: "analyze_food",
          title: "Analyze a food photo",
          annotations: { title: "Analyze a food photo", readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true }
        })
      }))

    it.scoped("discovery: both challenges carry complete Bazaar metadata, valid by @x402/extensions, that a cataloguing facilitator lists", () =>
      Effect.gen(function* () {
        const { url } = yield* Service
        const validator = jsonSchemaValidator()
        const isExtension = (value: unknown): value is DiscoveryExtension & Record<string, unknown> =>
          isRecord(value) && isRecord(value["info"]) && isRecord(value["info"]["input"]) && isRecord(value["schema"])
        const bazaarOf = (challenge: X402PaymentRequired) => {
          const bazaar = challenge.extensions?.["bazaar"]
          if (!isRecord(bazaar) || !isRecord(bazaar["info"]) || !isRecord(bazaar["schema"])) throw new Error("no bazaar extension")
          const info = bazaar["info"]
          const schema = bazaar["schema"]
          const validate = validator.compile(schema)
          expect(validate(info), JSON.stringify(validate.errors)).toBe(true)
          if (!isExtension(bazaar)) throw new Error("not a discovery extension")
          // The package's own validator (info against schema, the output example against the result's shape) and the
          // protocol-level rules a facilitator applies before cataloguing.
          expect(validateDiscoveryExtension(bazaar)).toEqual({ valid: true })
          expect(validateDiscoveryExtensionSpec(bazaar)).toEqual({ valid: true })
          // The output carries the shape of every result, not only an example.
          expect(schema).toMatchObject({ properties: { output: { properties: { example: { required: expect.arrayContaining(["items", "totals"]) } } } } })
          // The service metadata survives the Bazaar's sanitizing whole: name, tags, icon.
          expect(sanitizeResourceServiceMetadata(challenge.resource)).toEqual({
            serviceName: "morsel",
            tags: ["nutrition", "food", "calories", "vision", "macronutrients"],
            iconUrl: "https://morsel.example/icon.svg"
          })
          // What a cataloguing facilitator records when it settles a payment for this challenge.
          const accepted = challenge.accepts[0]!
          const listed = extractDiscoveryInfo({ x402Version: 2, resource: challenge.resource, accepted, payload: {}, extensions: challenge.extensions ?? {} }, accepted)
          expect(listed).toMatchObject({ resourceUrl: challenge.resource.url, serviceName: "morsel", iconUrl: "https://morsel.example/icon.svg" })
          return { info, schema, listed }
        }
        const outputExample = (info: Record<string, unknown>) => (isRecord(info["output"]) ? info["output"]["example"] : undefined)

        // REST: the header a client decodes, the same object in the body.
        const unpaid = yield* rest(url, "/v1/analyze", undefined, image, { "idempotency-key": "mcp-x402-bazaar-00001" })
        expect(unpaid.status).toBe(402)
        const header = unpaid.headers.get("payment-required")
        if (header === null) throw new Error("no PAYMENT-REQUIRED header")
        // Clients and facilitators cut large headers (x402 #2993): the challenge stays under 8 KB.
        console.log(`PAYMENT-REQUIRED header: ${header.length} bytes (base64)`)
        expect(header.length).toBeLessThan(8192)
        const fromHeader = decodePaymentRequiredHeader(header)
        expect(isRecord(unpaid.body) && unpaid.body["payment_required"]).toEqual(fromHeader)
        expect(fromHeader.resource).toMatchObject({
          url: "https://morsel.example/v1/analyze",
          description: expect.stringContaining("food photo"),
          mimeType: "application/json"
        })
        const http = bazaarOf(fromHeader)
        expect(http.listed).toMatchObject({ method: "POST" })
        expect(http.info["input"]).toMatchObject({ type: "http", method: "POST", bodyType: "json", body: { mime_type: "image/jpeg" } })
        const body = isRecord(http.info["input"]) ? http.info["input"]["body"] : undefined
        expect(Either.isRight(Schema.decodeUnknownEither(AnalyzeRequest)(body))).toBe(true)
        expect(Either.isRight(Schema.decodeUnknownEither(AnalysisResult)(outputExample(http.info)))).toBe(true)

        // MCP: the tool, its listed input schema, and an example result that the tool's output schema accepts.
        const mcp = yield* anonymous
        const { tools } = yield* Effect.promise(() => mcp.listTools())
        const tool = tools[0]!
        const challenge = yield* challengeFor("mcp-x402-bazaar-00002")
        expect(challenge.accepts).toEqual(fromHeader.accepts)
        expect(challenge.resource).toMatchObject({ url: "https://morsel.example/mcp", description: expect.stringContaining("analyze_food"), mimeType: "application/json" })
        const tooling = bazaarOf(challenge)
        expect(tooling.listed).toMatchObject({ toolName: "analyze_food" })
        console.log(`MCP challenge (structuredContent): ${JSON.stringify(challenge).length} bytes of JSON`)
        expect(tooling.info["input"]).toMatchObject({ type: "mcp", toolName: "analyze_food", transport: "streamable-http", inputSchema: tool.inputSchema })
        const example = isRecord(tooling.info["input"]) ? tooling.info["input"]["example"] : undefined
        expect(validator.compile(tool.inputSchema)(example)).toBe(true)
        expect(validator.compile(tool.outputSchema ?? {})(outputExample(tooling.info))).toBe(true)
      }))
  })
})
