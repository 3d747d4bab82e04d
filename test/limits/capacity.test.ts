// The credit endpoints' capacity limit: per key and service-wide requests per minute, in PostgreSQL, under TestClock.
import { createServer } from "node:http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpLayerRouter, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Layer, Schema, TestClock } from "effect"
import { AppConfigFromEnv } from "../../src/config.ts"
import { CreditKeyAuthLive } from "../../src/credits/http.ts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { TooManyRequests } from "../../src/domain/errors.ts"
import { CreditKeyAuth } from "../../src/http/Api.ts"
import { CreditCapacity, CreditCapacityWith } from "../../src/limits/Capacity.ts"
import { withCreditCapacity, withRetryAfter } from "../../src/limits/http.ts"
import { TestDatabase } from "../support/database.ts"
import { errorCode, send } from "../support/http.ts"

const MONDAY_104520 = Date.parse("2026-03-02T10:45:20Z")

const capacityLayer = (perKeyPerMinute: number, globalPerMinute: number) =>
  CreditCapacityWith({ perKeyPerMinute, globalPerMinute }).pipe(Layer.provideMerge(TestDatabase), Layer.orDie)

const admit = (subject: string) =>
  Effect.flatMap(CreditCapacity, (capacity) => capacity.admit(subject)).pipe(
    Effect.either,
    Effect.map((e) => (Either.isRight(e) ? "ok" : e.left.error.code))
  )

const admitMany = (subject: string, n: number) => Effect.forEach(Array.from({ length: n }), () => admit(subject))

describe("credit endpoints capacity", () => {
  it.effect("per key: the 4th request of a minute is refused until the minute ends; other keys go on", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      expect(yield* admitMany("alice", 4)).toEqual(["ok", "ok", "ok", "capacity_limited"])
      expect(yield* admit("bob")).toBe("ok")
      // 10:45:59.999: still the same minute.
      yield* TestClock.adjust(39_999)
      expect(yield* admit("alice")).toBe("capacity_limited")
      // 10:46:00.000: a new minute, a new count.
      yield* TestClock.adjust(1)
      expect(yield* admitMany("alice", 4)).toEqual(["ok", "ok", "ok", "capacity_limited"])
    }).pipe(Effect.provide(capacityLayer(3, 100))))

  it.effect("service-wide: the minute's total is shared by all keys; one key's refused requests do not use it up", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      expect(yield* admitMany("mallory", 10)).toEqual([...Array(3).fill("ok"), ...Array(7).fill("capacity_limited")])
      expect(yield* admit("alice")).toBe("ok")
      expect(yield* admit("bob")).toBe("ok")
      expect(yield* admit("carol")).toBe("capacity_limited")
      yield* TestClock.adjust(40_000)
      expect(yield* admit("carol")).toBe("ok")
    }).pipe(Effect.provide(capacityLayer(3, 5))))
})

/** A stand-in for a credit endpoint: the real Bearer middleware, the handler wrapped the way the credits group will be. */
class ProbeGroup extends HttpApiGroup.make("probe")
  .add(HttpApiEndpoint.get("balance", "/probe").addSuccess(Schema.Struct({ ok: Schema.Boolean })).addError(TooManyRequests))
  .middleware(CreditKeyAuth) {}
const ProbeApi = HttpApi.make("probe").add(ProbeGroup)
const ProbeLive = HttpApiBuilder.group(ProbeApi, "probe", (handlers) =>
  handlers.handle("balance", () => withCreditCapacity(Effect.succeed({ ok: true })).pipe(withRetryAfter))
)

const probeServer = Effect.gen(function* () {
  const app = HttpLayerRouter.serve(HttpLayerRouter.addHttpApi(ProbeApi).pipe(Layer.provide(ProbeLive)), { disableListenLog: true, disableLogger: true }).pipe(
    Layer.provide(CreditKeyAuthLive),
    Layer.provide(CreditCapacityWith({ perKeyPerMinute: 2, globalPerMinute: 600 })),
    Layer.provide(Layer.mergeAll(TestDatabase, AppConfigFromEnv({}))),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 })),
    Layer.orDie
  )
  const address = Context.get(yield* Layer.build(app), HttpServer.HttpServer).address
  if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("not a TCP server")
  return `http://127.0.0.1:${address.port}/probe`
})

describe("withCreditCapacity over HTTP", () => {
  it.scoped("429 capacity_limited with Retry-After in whole seconds; the key's next minute is served", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(MONDAY_104520)
      const url = yield* probeServer
      const key = newCreditKey(false)
      const get = (k: string) => Effect.promise(() => send(url, { headers: { authorization: `Bearer ${k}` } }))
      expect((yield* get(key)).status).toBe(200)
      expect((yield* get(key)).status).toBe(200)
      const refused = yield* get(key)
      expect(refused.status).toBe(429)
      expect(errorCode(refused)).toBe("capacity_limited")
      expect(refused.headers.get("retry-after")).toBe("60")
      expect((yield* get(newCreditKey(false))).status).toBe(200)
      // A malformed key is refused by the Bearer middleware before it is counted.
      expect((yield* get("not-a-key")).status).toBe(401)
      yield* TestClock.adjust(40_000)
      expect((yield* get(key)).status).toBe(200)
    }))
})
