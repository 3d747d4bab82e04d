// Limits through HTTP: two server instances on one database, and a failure storm that pauses one key only.
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Queue } from "effect"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsLive } from "../../src/limits/Limits.ts"
import { realPostgresUrl, sharedTestDatabase } from "../support/database.ts"
import { type FakeOpenAI, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { type Answer, errorCode, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const photo = await makeImage(320, 240, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }

/** `instances` servers with the real limits on one database, one fake model and one shared in-memory credit ledger. */
const setup = (instances: number, credits: Readonly<Record<string, number>>) =>
  Effect.gen(function* () {
    const fake = yield* startFakeOpenAI()
    const database = yield* sharedTestDatabase
    const funding = yield* Layer.build(FundingMemory(credits))
    const urls: Array<string> = []
    for (let i = 0; i < instances; i++) {
      const server = yield* startServer({
        env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url },
        dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, Layer.succeedContext(funding), LimitsLive),
        database: database.instance()
      })
      urls.push(server.url)
    }
    const analyze = (url: string, who: string, idempotencyKey: string) =>
      Effect.promise(() =>
        send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": idempotencyKey, authorization: `Bearer memory_${who}` } })
      )
    return { fake, urls, analyze, ledger: Context.get(funding, FundingMemoryLedger) }
  })

/** Requests still waiting for the model right now. */
const inFlight = (fake: FakeOpenAI) => fake.requests.filter((r) => !r.settled).length

const expectRateLimited = (answer: Answer) => {
  expect(answer.status, answer.text).toBe(429)
  expect(errorCode(answer)).toBe("rate_limited")
  expect(answer.headers.get("retry-after")).toBe("60")
}

describe(`limits across instances (${realPostgresUrl ? "real PostgreSQL, a connection pool per instance" : "PGlite, one shared backend"})`, () => {
  it.scoped("10 slow analyses fired at two instances: never more than 3 running, the rest 429 rate_limited, nothing consumed for them", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger, urls } = yield* setup(2, { alice: 10, bob: 10 })
      fake.pause()
      fake.setFallback(Reply.answer(chickenRice))
      const answers = yield* Queue.unbounded<Answer>()
      for (let i = 0; i < 10; i++) {
        yield* Effect.fork(
          Effect.flatMap(analyze(urls[i % 2]!, i % 4 < 2 ? "alice" : "bob", `two-instances-slow-${i}`), (a) => Queue.offer(answers, a))
        )
      }
      const refused = yield* Queue.takeN(answers, 7)
      for (const answer of refused) expectRateLimited(answer)
      yield* fake.awaitRequests(3)
      expect(fake.requests).toHaveLength(3)
      expect(inFlight(fake)).toBe(3)
      // Three credits are reserved for the running three; none was touched for the seven refused.
      expect(yield* ledger.reserved).toBe(3)
      const held = yield* ledger.balances
      expect((held["alice"] ?? 0) + (held["bob"] ?? 0)).toBe(17)
      // A fourth request to either instance is still refused while the three run.
      expectRateLimited(yield* analyze(urls[0]!, "alice", "two-instances-late-0"))
      expectRateLimited(yield* analyze(urls[1]!, "bob", "two-instances-late-1"))
      fake.resume()
      const finished = yield* Queue.takeN(answers, 3)
      for (const answer of finished) expect(answer.status, answer.text).toBe(200)
      expect(yield* ledger.reserved).toBe(0)
      const after = yield* ledger.balances
      expect((after["alice"] ?? 0) + (after["bob"] ?? 0)).toBe(17)
      expect(fake.requests).toHaveLength(3)
      // The slots are free again on both instances.
      expect((yield* analyze(urls[1]!, "alice", "two-instances-after-0")).status).toBe(200)
      expect((yield* analyze(urls[0]!, "bob", "two-instances-after-1")).status).toBe(200)
    }))

  it.scoped("a failure storm from one key reaches failure_limit while another key keeps working; its completed result still replays", () =>
    Effect.gen(function* () {
      const { analyze, fake, ledger, urls } = yield* setup(2, { alice: 10, bob: 10 })
      const [a, b] = [urls[0]!, urls[1]!]
      fake.enqueue(Reply.answer(chickenRice))
      const kept = yield* analyze(a, "alice", "storm-good-request-0")
      expect(kept.status, kept.text).toBe(200)
      // Provider refusals are not the caller's failures.
      fake.enqueue(Reply.refusal(), Reply.refusal())
      for (let i = 0; i < 2; i++) expect((yield* analyze(b, "alice", `storm-refused-${i}-000000`)).status).toBe(502)
      fake.setFallback(Reply.content("this is not JSON"))
      for (let i = 0; i < 25; i++) {
        const failed = yield* analyze(i % 2 === 0 ? a : b, "alice", `storm-failure-${i}-000000`)
        expect(failed.status, failed.text).toBe(502)
      }
      const modelCalls = fake.requests.length
      for (const url of [a, b]) {
        const paused = yield* analyze(url, "alice", "storm-failure-26-00000")
        expect(paused.status, paused.text).toBe(429)
        expect(errorCode(paused)).toBe("failure_limit")
        expect(paused.headers.get("retry-after")).toBe("3600")
      }
      expect(fake.requests).toHaveLength(modelCalls)
      const replay = yield* analyze(b, "alice", "storm-good-request-0")
      expect(replay.status).toBe(200)
      expect(replay.body).toEqual(kept.body)
      fake.setFallback(Reply.answer(chickenRice))
      expect((yield* analyze(b, "bob", "storm-bob-request-0000")).status).toBe(200)
      expect(yield* ledger.balances).toEqual({ alice: 9, bob: 9 })
    }))
})
