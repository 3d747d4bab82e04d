// An integrator's test as docs/testing.md shows it: the sandbox in the test's own process through `morsel/testing`.
import { randomBytes, randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { answerFor, startSandbox } from "../../src/testing.ts"
import { makeImage } from "../support/images.ts"

describe("startSandbox", () => {
  const key = `morsel_test_${randomBytes(32).toString("hex")}`
  let sandbox: Awaited<ReturnType<typeof startSandbox>>
  let photo: Awaited<ReturnType<typeof makeImage>>

  beforeAll(async () => {
    photo = await makeImage(40, 30)
    sandbox = await startSandbox()
    const checkout = (await fetch(`${sandbox.url}/v1/credits/checkout`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ order_id: randomUUID() })
    }).then((r) => r.json())) as { session_id: string }
    const paid = await fetch(`${sandbox.url}/sandbox/checkout/${checkout.session_id}/pay`, { method: "POST" })
    expect(paid.status).toBe(200)
  }, 120_000)
  afterAll(() => sandbox?.close())

  const analyze = (scenario?: string) =>
    fetch(`${sandbox.url}/v1/analyze`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "idempotency-key": randomUUID(),
        authorization: `Bearer ${key}`,
        ...(scenario ? { "sandbox-scenario": scenario } : {})
      },
      body: JSON.stringify({ image_base64: photo.base64, mime_type: photo.mime })
    })

  it("is started with its food index built: a first search is answered at once, not after the index (1–5 s)", async () => {
    const started = performance.now()
    const search = await fetch(`${sandbox.url}/v1/foods?q=${encodeURIComponent("rice, white, cooked")}&limit=1`)
    expect(search.status).toBe(200)
    expect(performance.now() - started).toBeLessThan(1000)
  })

  it("answers with the meal the scripted model gives this photo, and 422 when told there is no food", async () => {
    const answered = await analyze()
    const result = (await answered.json()) as { model: string; dish_name: string }
    expect([answered.status, result.model], JSON.stringify(result)).toEqual([200, "sandbox"])
    expect(result.dish_name).toBe(answerFor({ image: photo.bytes, mime: photo.mime, language: "en" }).dish_name)
    expect((await analyze("no_food")).status).toBe(422)
    const balance = (await fetch(`${sandbox.url}/v1/credits/balance`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json())) as {
      credits_remaining: number
    }
    expect(balance.credits_remaining).toBe(499)
  }, 60_000)
})
