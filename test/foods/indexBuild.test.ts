// The food index is built once the server listens, in turns: GET /health and other requests are answered meanwhile.
import { describe, expect, it } from "@effect/vitest"
import { buildIndex, buildIndexInTurns } from "../../src/foods/core/foodIndex.ts"
import { searchIn } from "../../src/foods/core/search.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"

describe("building the food index in turns", () => {
  it("lets timers run while it builds, and builds the index buildIndex builds", async () => {
    const records = shippedFoods()
    let turns = 0
    const timer = setInterval(() => turns++, 1)
    const started = performance.now()
    const index = await buildIndexInTurns(records)
    const elapsed = performance.now() - started
    clearInterval(timer)
    // About one turn per slice of BUILD_SLICE_MS; a timer of 1 ms that never ran would mean the loop was held throughout.
    expect(turns).toBeGreaterThan(Math.min(20, elapsed / 100))
    const whole = buildIndex(records)
    expect(index.size).toBe(whole.size)
    for (const text of ["tofu", "rice, white, cooked", "grilled chicken breast", "nuts", "brocolli", "olive oil"]) {
      expect(searchIn(index, text, 5).map((r) => r.sourceId), text).toEqual(searchIn(whole, text, 5).map((r) => r.sourceId))
    }
  })

  it("stops when its signal aborts (a server stopped while it builds)", async () => {
    const controller = new AbortController()
    const building = buildIndexInTurns(shippedFoods(), controller.signal)
    controller.abort(new Error("stopped"))
    await expect(building).rejects.toThrow("stopped")
  })
})
