// SPEC: any request content type but application/json gets 415, on every POST, whether or not a body follows it.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { errorCode, send } from "../support/http.ts"
import { Server, serverLayer } from "../support/server.ts"
import { noFoods } from "../../src/foods/core/FoodDbLive.ts"

const ServerUnderTest = serverLayer({
  dependencies: Layer.mergeAll(
    VisionModelLive,
    Layer.succeed(FoodDb, { matcherVersion: "test", match: () => Effect.succeedNone, ...noFoods }),
    FundingMemory({ alice: 1 }),
    LimitsUnlimited
  )
})

const POSTS = [
  "/v1/analyze",
  "/v1/credits/checkout",
  "/v1/credits/confirm",
  "/v1/credits/checkout-status",
  "/v1/credits/feedback",
  "/webhooks/stripe",
  "/mcp",
  "/admin/rpc"
]

const post = (path: string, headers: Record<string, string>, rawBody = "") =>
  Effect.flatMap(Server, ({ url }) =>
    Effect.promise(() => send(`${url}${path}`, { method: "POST", rawBody, headers: { authorization: "Bearer memory_alice", ...headers } }))
  )

describe("content types of POST requests", () => {
  it.layer(ServerUnderTest)("on the whole service", (it) => {
    it.effect("a declared type other than JSON gets 415, with an empty body too", () =>
      Effect.gen(function* () {
        for (const path of POSTS) {
          for (const type of ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
            const answer = yield* post(path, { "content-type": type })
            expect([path, type, answer.status, errorCode(answer)]).toEqual([path, type, 415, "unsupported_media_type"])
          }
          const withBody = yield* post(path, { "content-type": "text/plain" }, "{}")
          expect([path, withBody.status]).toEqual([path, 415])
        }
      }))

    it.effect("an empty JSON POST, or one with no type at all, is judged by its route, never 415", () =>
      Effect.gen(function* () {
        const json = yield* post("/v1/credits/checkout-status", { "content-type": "application/json" })
        // fetch gives a string body a text/plain type of its own; without a body it sends no type.
        const { url } = yield* Server
        const untyped = yield* Effect.promise(() =>
          fetch(`${url}/v1/credits/checkout-status`, { method: "POST", headers: { authorization: "Bearer memory_alice" } })
        )
        for (const status of [json.status, untyped.status]) {
          expect(status).not.toBe(415)
          expect(status).toBeLessThan(500)
        }
      }))
  })
})
