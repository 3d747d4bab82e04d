// The request lifecycle over time (TestClock): replay for 24 hours, 410 after, purge, and takeover after a crash.
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, TestClock } from "effect"
import { InputFingerprint, RequestId } from "../../src/domain/ids.ts"
import { Funding } from "../../src/analysis/Funding.ts"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { inputFingerprint } from "../../src/analysis/AnalyzeRequests.ts"
import { RequestStore, RequestStoreLive } from "../../src/analysis/RequestStore.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { errorCode, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { TestDatabase } from "../support/database.ts"
import { bearerCredential } from "../support/funding.ts"
import { startServer } from "../support/server.ts"
import { settle } from "../support/settle.ts"

const photo = await makeImage(320, 240, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }

const setup = Effect.gen(function* () {
  const fake = yield* startFakeOpenAI()
  fake.setFallback(Reply.answer(chickenRice))
  const database = yield* Layer.build(TestDatabase.pipe(Layer.orDie))
  const funding = yield* Layer.build(FundingMemory({ alice: 10, bob: 10 }))
  const { url } = yield* startServer({
    env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url },
    dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, Layer.succeedContext(funding), LimitsUnlimited),
    database: Layer.succeedContext(database)
  })
  const analyze = (key: string, who = "alice") =>
    Effect.promise(() => send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": key, authorization: `Bearer memory_${who}` } }))
  return { fake, analyze, database, funding, ledger: Context.get(funding, FundingMemoryLedger) }
})

describe("request lifecycle", () => {
  it.scoped("a completed result replays for 24 hours, then 410; the next new request purges its text", () =>
    Effect.gen(function* () {
      const { analyze, database, fake, ledger } = yield* setup
      const first = yield* analyze("lifecycle-replay-0001")
      expect(first.status).toBe(200)
      yield* TestClock.adjust("23 hours")
      const replay = yield* analyze("lifecycle-replay-0001")
      expect(replay.status).toBe(200)
      expect(replay.body).toEqual(first.body)
      yield* TestClock.adjust("1 hour")
      const gone = yield* analyze("lifecycle-replay-0001")
      expect(gone.status).toBe(410)
      expect(errorCode(gone)).toBe("result_expired")
      expect(gone.body).toMatchObject({ error: { request_id: (first.body as { request_id: string }).request_id } })
      expect(fake.requests).toHaveLength(1)
      expect(yield* ledger.balances).toEqual({ alice: 9, bob: 10 })

      const sql = Context.get(database, PgClient.PgClient)
      const stored = sql<{ n: number }>`SELECT count(*)::int AS n FROM analysis_requests WHERE result IS NOT NULL`
      expect((yield* stored)[0]!.n).toBe(1)
      expect((yield* analyze("lifecycle-replay-0002", "bob")).status).toBe(200)
      // The expired text is gone; only the new result is kept. The request itself is still on record.
      expect((yield* stored)[0]!.n).toBe(1)
      const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM analysis_requests`
      expect(rows[0]!.n).toBe(2)
      expect((yield* analyze("lifecycle-replay-0001")).status).toBe(410)
    }))

  it.scoped("an attempt abandoned by a crashed instance is taken over after its lease and its credit returned", () =>
    Effect.gen(function* () {
      const { analyze, database, funding, ledger } = yield* setup
      // An instance claims the key, reserves a credit, and dies before finishing.
      const crashed = yield* Effect.gen(function* () {
        const store = yield* RequestStore
        const method = yield* Effect.flatMap(Funding, (f) =>
          f.identify(bearerCredential("Bearer memory_alice"))
        )
        const { claim } = yield* store.claim({
          payer: method.payer.id,
          idempotencyKey: "lifecycle-crash-0001",
          fingerprint: inputFingerprint(photo.bytes, { ...body, language: "en" }),
          funding: "credit",
          leaseMs: 60_000
        })
        if (claim._tag !== "Started") return yield* Effect.dieMessage("expected a new attempt")
        yield* method.reserve(claim.requestId)
        return claim.requestId
      }).pipe(Effect.provide(RequestStoreLive), Effect.provide(Layer.succeedContext(database)), Effect.provide(Layer.succeedContext(funding)))
      expect(yield* ledger.balances).toEqual({ alice: 9, bob: 10 })
      expect(crashed).toEqual(expect.any(String))

      // Within the lease the key is busy.
      const busy = yield* analyze("lifecycle-crash-0001")
      expect(busy.status).toBe(409)
      expect(errorCode(busy)).toBe("in_progress")
      yield* TestClock.adjust("61 seconds")
      const taken = yield* analyze("lifecycle-crash-0001")
      expect(taken.status, taken.text).toBe(200)
      expect(taken.body).not.toMatchObject({ request_id: crashed })
      // The crashed attempt's credit came back; only the completed attempt was paid for.
      expect(yield* ledger.balances).toEqual({ alice: 9, bob: 10 })
      expect(yield* ledger.reserved).toBe(0)
    }))

  it.scoped("nobody retries: the sweeper closes the abandoned attempt and returns its credit", () =>
    Effect.gen(function* () {
      const { database, funding, ledger } = yield* setup
      yield* Effect.gen(function* () {
        const store = yield* RequestStore
        const method = yield* Effect.flatMap(Funding, (f) => f.identify(bearerCredential("Bearer memory_bob")))
        const { claim } = yield* store.claim({ payer: method.payer.id, idempotencyKey: "lifecycle-orphan-01", fingerprint: InputFingerprint.make("x"), funding: "credit", leaseMs: 60_000 })
        if (claim._tag !== "Started") return yield* Effect.dieMessage("expected a new attempt")
        yield* method.reserve(claim.requestId)
      }).pipe(Effect.provide(RequestStoreLive), Effect.provide(Layer.succeedContext(database)), Effect.provide(Layer.succeedContext(funding)))
      expect(yield* ledger.balances).toEqual({ alice: 10, bob: 9 })
      yield* TestClock.adjust("5 minutes")
      yield* settle(Effect.map(ledger.balances, (b) => b["bob"] === 10))
      const sql = Context.get(database, PgClient.PgClient)
      const [row] = yield* sql<{ status: string; failure_code: string }>`SELECT status, failure_code FROM analysis_requests WHERE idempotency_key = 'lifecycle-orphan-01'`
      expect(row).toEqual({ status: "failed", failure_code: "abandoned" })
      expect(yield* ledger.balances).toEqual({ alice: 10, bob: 10 })
    }))

  it.scoped("an attempt taken over meanwhile (e.g. by an instance whose clock runs ahead) is not served: 503, credit back", () =>
    Effect.gen(function* () {
      const { analyze, database, fake, funding, ledger } = yield* setup
      fake.pause()
      const slow = yield* Effect.fork(analyze("lifecycle-outlived-01"))
      yield* fake.awaitRequests(1)
      expect(yield* ledger.balances).toEqual({ alice: 9, bob: 10 })
      // Another instance closes the attempt as abandoned and returns its credit while the model still thinks.
      const sql = Context.get(database, PgClient.PgClient)
      const [taken] = yield* sql<{ request_id: string }>`
        UPDATE analysis_requests SET status = 'failed', failure_code = 'abandoned'
        WHERE idempotency_key = 'lifecycle-outlived-01' RETURNING request_id`
      yield* Context.get(funding, Funding).abandon(RequestId.make(taken!.request_id), "credit")
      expect(yield* ledger.balances).toEqual({ alice: 10, bob: 10 })
      fake.resume()
      const answer = yield* Fiber.join(slow)
      expect(answer.status, answer.text).toBe(503)
      expect(errorCode(answer)).toBe("storage_unavailable")
      expect(yield* ledger.balances).toEqual({ alice: 10, bob: 10 })
      expect(yield* ledger.reserved).toBe(0)
      const [row] = yield* sql<{ status: string; result: unknown }>`SELECT status, result FROM analysis_requests WHERE idempotency_key = 'lifecycle-outlived-01'`
      expect(row).toEqual({ status: "failed", result: null })
    }))
})
