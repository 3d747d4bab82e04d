// Through HTTP with the real limits and one slot: however an analysis ends, its slot is free for the next one.
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { FundingMemory, FundingMemoryLedger } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsLive } from "../../src/limits/Limits.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { TestDatabase } from "../support/database.ts"
import { errorCode, send } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const photo = await makeImage(320, 240, "jpeg")
const body = { image_base64: photo.base64, mime_type: photo.mime }

describe("analysis slots", () => {
  it.scopedLive("with one slot, a served result, no food and a failed model call each leave it free for the next analysis", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      const database = yield* Layer.build(TestDatabase.pipe(Layer.orDie))
      const funding = yield* Layer.build(FundingMemory({ alice: 10 }))
      const { url } = yield* startServer({
        env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url, LIMIT_CONCURRENT: "1" },
        dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, Layer.succeedContext(funding), LimitsLive),
        database: Layer.succeedContext(database)
      })
      const sql = Context.get(database, PgClient.PgClient)
      const held = Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM limit_admissions WHERE released_at IS NULL`, (rows) => rows[0]!.n)
      let n = 0
      const analyze = Effect.promise(() =>
        send(`${url}/v1/analyze`, { body, headers: { "idempotency-key": `one-slot-analysis-${n++}`, authorization: "Bearer memory_alice" } })
      )

      fake.enqueue(
        Reply.answer(chickenRice),
        Reply.answer({ food_detected: false, dish_name: "", items: [] }),
        Reply.status(400, { code: "invalid_image" }),
        Reply.answer(chickenRice)
      )
      for (const expected of [200, 422, 502, 200]) {
        const answer = yield* analyze
        expect(answer.status, answer.text).toBe(expected)
        expect(errorCode(answer)).not.toBe("rate_limited")
        expect(yield* held).toBe(0)
      }
      expect(yield* Context.get(funding, FundingMemoryLedger).balances).toEqual({ alice: 8 })
      expect((yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM limit_admissions`)[0]!.n).toBe(4)
    }))
})
