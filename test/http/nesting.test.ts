import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { nestsDeeperThan } from "../../src/request/read.ts"

/** The rule stated one character at a time: a backslash inside a string escapes the next character. */
const deepestNesting = (text: string): number => {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === "\\") i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === "{" || c === "[") deepest = Math.max(deepest, ++depth)
    else if (c === "}" || c === "]") depth--
  }
  return deepest
}

describe("nestsDeeperThan", () => {
  it("counts brackets outside strings only, escapes included (property)", () => {
    const piece = fc.constantFrom("{", "}", "[", "]", '"', "\\", "\\\\", '\\"', "a", ":", ",", " ")
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), fc.integer({ min: 0, max: 6 }), (pieces, max) => {
        const text = pieces.join("")
        expect(nestsDeeperThan(text, max)).toBe(deepestNesting(text) > max)
      }),
      { numRuns: 5000 }
    )
  })

  it("skips a long string in one step and still sees what follows it", () => {
    const image = "A".repeat(2_000_000)
    expect(nestsDeeperThan(`{"image_base64":"${image}","x":[[1]]}`, 2)).toBe(true)
    expect(nestsDeeperThan(`{"image_base64":"${image}\\\\","x":[1]}`, 2)).toBe(false)
    expect(nestsDeeperThan(`{"image_base64":"${image}\\",[[[[","x":1}`, 2)).toBe(false)
  })
})
