// CONTRACT "Foods and nutrition": no food call holds the server's event loop for more than 50 ms, whatever its input
// within the bounds (q up to 200 characters, 20 items, a meal in words of 2,000 characters). The slowest texts we could
// build, and a search for slower ones, through GET /v1/foods, POST /v1/nutrition (items and text) and MCP search_foods,
// while the loop is watched.
import { describe, expect, it as plain, layer } from "@effect/vitest"
import fc from "fast-check"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbMemory, readerOf } from "../../src/foods/core/FoodDbLive.ts"
import { buildIndex } from "../../src/foods/core/matcher.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { connect } from "../support/clients.ts"
import { send } from "../support/http.ts"
import { Server, serverLayer } from "../support/server.ts"
import { lesserHolds } from "./loopHold.ts"

const records = shippedFoods()
const dependencies = Layer.mergeAll(VisionModelLive, FoodDbMemory(records), FundingMemory({}), LimitsUnlimited)

const LETTERS = "abcdefghijklmnopqrstuvwxyz"
const within200 = (words: ReadonlyArray<string>) => words.join(" ").slice(0, 200).trim()

/**
 * The slowest texts we know, each made distinct by `n` through a word of its own in front (a text already searched is
 * answered from memory, and the makes below repeat every few `n`).
 */
const hostile = (n: number): ReadonlyArray<string> =>
  slowest(n).map((text) => within200([`zq${LETTERS[n % 26]}${LETTERS[Math.floor(n / 26) % 26]}`, text]))

const slowest = (n: number): ReadonlyArray<string> => [
  // 100 one-letter words: each begins thousands of words.
  within200(Array.from({ length: 100 }, (_, i) => LETTERS[(i + n) % 26]!)),
  // 66 distinct two-letter words.
  within200(Array.from({ length: 66 }, (_, i) => `${LETTERS[(i + n) % 26]}${LETTERS[Math.floor(i / 26 + n) % 26]}`)),
  // A long unknown word, repeated: every repair of a misspelling is tried on it.
  within200(Array.from({ length: 13 }, () => `chickenbroccol${LETTERS[n % 26]}`)),
  within200(Array.from({ length: 8 }, (_, i) => `${LETTERS[(i + n) % 26]!.repeat(24)}`)),
  // Unicode and digits.
  within200(Array.from({ length: 100 }, (_, i) => ["é", "ж", "日本", "ß", "ø", "ñ", "ą"][(i + n) % 7]!)),
  within200(Array.from({ length: 100 }, (_, i) => String((i + n) % 10))),
  // Words that each begin or are the words of thousands of records, and SR28's group words.
  within200(Array.from({ length: 40 }, (_, i) => ["s", "c", "ch", "co", "sal", "coo", "wit", "raw", "bee", "por", "and", "with", "beef", "fat", "meat"][(i + n) % 15]!)),
  within200(["product", "fat", "meat", "with", "beef", "separable", "lean", "vegetable", "products", "cooked", "raw", LETTERS[n % 26]!]),
  within200(Array.from({ length: 30 }, (_, i) => ["chickn", "brocolli", "whit", "salmn", "chese", "porkk", "beeff"][(i + n) % 7]!))
]

/** `call` with a `/health` sent beside it, which must answer too: a call that held the server would hold it. */
const besideHealth =
  <A>(url: string, call: () => Promise<A>) =>
  async () => {
    const [answer, health] = await Promise.all([call(), send(`${url}/health`)])
    expect(health.status).toBe(200)
    return answer
  }

/** Every make held the loop at most 50 ms (the lesser of its two calls); the longest hold, for the log. */
const within50 = (holds: ReadonlyArray<{ readonly label: string; readonly cpuMs: number }>) => {
  for (const { cpuMs, label } of holds) expect([label.slice(0, 40), cpuMs <= 50]).toEqual([label.slice(0, 40), true])
  return Math.max(...holds.map((hold) => hold.cpuMs)).toFixed(1)
}

describe("no food call holds the event loop", () => {
  // These tests send some 120 food calls within a minute from one address: more than its default allowance.
  layer(serverLayer({ dependencies, env: { LIMIT_FOODS_PER_MINUTE: "1000" } }), { excludeTestServices: true, timeout: 300_000 })("on the shipped SR28 copy", (it) => {
    it.effect("GET /v1/foods with the slowest texts: each answered, the loop never held 50 ms", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        // Warm: the first calls of a process compile the code they run (the server's, and the client's here).
        for (const q of hostile(90)) yield* Effect.promise(() => send(`${url}/v1/foods?q=${encodeURIComponent(q)}&limit=25`))
        // Each slow text is searched as two texts of the same make (a text searched before is answered from memory).
        const search = (q: string) => besideHealth(url, () => send(`${url}/v1/foods?q=${encodeURIComponent(q)}&limit=25`))
        const makes = [0, 2].flatMap((n) => hostile(n).map((q, k) => ({ label: q, calls: [search(q), search(hostile(n + 1)[k]!)] as const })))
        const holds = yield* Effect.promise(() => lesserHolds(makes, (answer, label) => expect([label, answer.status]).toEqual([label, 200])))
        console.log(`GET /v1/foods, ${makes.length} texts twice: the loop held at most ${within50(holds)} ms CPU (the lesser of each text's two calls)`)
      }))

    it.effect("POST /v1/nutrition of 20 hostile items, nothing matched: answered with suggestions, the loop never held 50 ms", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        yield* Effect.promise(() => send(`${url}/v1/nutrition`, { method: "POST", body: { items: hostile(91).map((query) => ({ query, grams: 1 })) } }))
        const body = (n: number) => ({ items: Array.from({ length: 20 }, (_, i) => ({ query: hostile(n + i)[i % 9]!, grams: 100 })) })
        const post = (n: number) => besideHealth(url, () => send(`${url}/v1/nutrition`, { method: "POST", body: body(n) }))
        const makes = [100, 140, 180].map((n) => ({ label: `20 items from hostile(${n})`, calls: [post(n), post(n + 20)] as const }))
        const holds = yield* Effect.promise(() =>
          lesserHolds(makes, (answer, label) => {
            const answered = answer.body as { items: Array<unknown>; unmatched: Array<{ index: number }> }
            expect([label, answer.status, answered.items.length + answered.unmatched.length]).toEqual([label, 200, 20])
          })
        )
        console.log(`POST /v1/nutrition, ${makes.length} calls of 20 items twice: the loop held at most ${within50(holds)} ms CPU (the lesser of each call's two)`)
      }))

    it.effect("POST /v1/nutrition with the slowest meals in words of up to 2,000 characters: each answered, no text holds the loop 50 ms", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        // A food is looked for once and its searches are then answered from memory: each pass sends texts of the same
        // make never sent before, every food of them with a word of its own (`tag`), so that no search is a repeat.
        const tag = (n: number, i: number) => `${LETTERS[n % 26]}${LETTERS[i % 26]}q${LETTERS[(n + i) % 26]}`
        const foods = (make: (i: number) => string) => Array.from({ length: 20 }, (_, i) => make(i)).join(", ")
        const meals = (n: number) =>
          [
            `${n}/${n + 1} `.repeat(500),
            "a ".repeat(1000),
            ["½", "⅓", "¼"][n % 3]!.repeat(2000),
            "(".repeat(2000),
            `${n} ${n} ${n} ${n} `.repeat(250),
            ["two and a half cups of ", "one and a half mugs of "][n % 2]!.repeat(87),
            "for lunch I had some of a bit of ".repeat(60),
            // Twenty foods nothing matches: each asks for suggestions (a call makes at most eight searches).
            foods((i) => `zq${n}${i}wv${"k".repeat(60)} qq${i}zz${"j".repeat(25)}`),
            // Twenty foods of one-letter words, of words that begin thousands of others, of misspellings.
            foods((i) => `${Array.from({ length: 44 }, (_, k) => LETTERS[(i * 7 + k * 3 + n) % 26]).join(" ")} ${tag(n, i)}`),
            foods((i) => `${Array.from({ length: 28 }, (_, k) => ["s", "c", "ch", "co", "sal", "coo", "raw", "bee", "por", "beef", "fat", "meat"][(i + k + n) % 12]).join(" ")} ${tag(n, i)}`),
            foods((i) => `${hostile(i + n)[8]!.slice(0, 88)} ${tag(n, i)}`),
            // Twenty foods each naming a unit, which is looked for through the records of the food.
            foods((i) => `${i + 2} slices of ${["pizza cheese pepperoni", "bread whole wheat toasted", "cake chocolate frosted", "ham turkey bologna"][(i + n) % 4]} ${tag(n, i)}`),
            foods((i) => `3 tbsp ${["chicken", "rice", "salad", "cheese", "bread", "milk", "sauce", "beef"].map((_, k, all) => all[(i + k + n) % 8]).join(" ")} ${tag(n, i)}`),
            foods((i) => `${["a cup of", "a glass of", "a bowl of", "2 mugs of", "a can of"][i % 5]} ${hostile(i + n)[8]!.slice(0, 64)} ${tag(n, i)}`)
          ].map((text) => [...text].slice(0, 2000).join(""))
        // Warm: the first calls of a process compile the code they run (the server's, and the client's here).
        for (const text of meals(0)) yield* Effect.promise(() => send(`${url}/v1/nutrition`, { method: "POST", body: { text } }))
        const [first, second] = [meals(1), meals(2)]
        const post = (text: string) => besideHealth(url, () => send(`${url}/v1/nutrition`, { method: "POST", body: { text } }))
        const makes = first.map((text, k) => ({ label: text, calls: [post(text), post(second[k]!)] as const }))
        const holds = yield* Effect.promise(() => lesserHolds(makes, (answer, label) => expect([label.slice(0, 30), answer.status]).toEqual([label.slice(0, 30), 200])))
        console.log(`POST /v1/nutrition, ${makes.length} meals in words of up to 2,000 characters twice: the loop held at most ${within50(holds)} ms CPU`)
      }))

    it.scoped("MCP search_foods with the slowest texts: each answered, the loop never held 50 ms", () =>
      Effect.gen(function* () {
        const { url } = yield* Server
        const mcp = yield* connect(url)
        for (const query of hostile(92)) yield* Effect.promise(() => mcp.callTool({ name: "search_foods", arguments: { query, limit: 25 } }))
        // Each slow text is searched as two texts of the same make (a text searched before is answered from memory).
        const search = (query: string) => besideHealth(url, () => mcp.callTool({ name: "search_foods", arguments: { query, limit: 25 } }))
        const makes = hostile(70).map((query, k) => ({ label: query, calls: [search(query), search(hostile(71)[k]!)] as const }))
        const holds = yield* Effect.promise(() => lesserHolds(makes, (answer, label) => expect([label, answer.isError ?? false]).toEqual([label, false])))
        console.log(`MCP search_foods, ${makes.length} texts twice: the loop held at most ${within50(holds)} ms CPU (the lesser of each text's two calls)`)
      }))
  })

  // Searching for slower texts: words drawn from those that cost most (short prefixes, common and group words,
  // misspellings, long unknown words, other scripts and digits), each text read afresh as every path reads it.
  plain("no text found by a search for slow inputs holds a food path's turn more than 50 ms of CPU", { timeout: 300_000 }, () => {
    const index = buildIndex(records)
    const reader = readerOf(index)
    const heavy = ["a", "s", "c", "ch", "co", "sa", "chi", "sal", "coo", "wit", "raw", "and", "or", "bee", "por", "with", "salt", "beef", "fat", "meat", "product", "products", "separable", "lean", "vegetable", "chicken", "cheese", "brocolli", "chickn", "whit", "chickenbroccoli", "é", "ж", "日本", "1", "42", "100%"]
    // Warm: the first texts of a process compile the code they run.
    for (const [i, w] of heavy.entries()) reader.search(`${w} ${heavy[(i * 7) % heavy.length]}`, 25)
    const word = fc.oneof(fc.constantFrom(...heavy), fc.stringMatching(/^[a-z]{1,14}$/), fc.stringMatching(/^[a-z]{2}$/))
    const text = fc
      .tuple(fc.array(word, { minLength: 1, maxLength: 100 }), fc.constantFrom(" ", ", "))
      .map(([words, separator]) => words.join(separator).slice(0, 200))
      .filter((t) => t.trim().length > 0)
    let worst = { ms: 0, text: "" }
    fc.assert(
      fc.property(text, (q) => {
        // As in loopHold.ts: the thread computed for at most the lesser of the process's CPU time and the wall time.
        const once = (step: () => unknown) => {
          // The index remembers the texts it searched: each run starts without them, as a new text does.
          index.searches.clear()
          index.prepared.clear()
          const before = process.cpuUsage()
          const started = performance.now()
          step()
          const used = process.cpuUsage(before)
          return Math.min((used.user + used.system) / 1000, performance.now() - started)
        }
        // Each step twice, the lesser kept: a collection or a busy core can stretch one run (a CI run saw two texts pass
        // 50 ms together where the slowest of its other pass took 14 ms), where a slow text is slow both times.
        const held = (step: () => unknown) => Math.min(once(step), once(step))
        // A nutrition item's matching, its suggestions (the call takes its turn between them), a search of the most foods.
        const ms = Math.max(
          held(() => reader.named(q)),
          held(() => reader.search(q, 5)),
          held(() => reader.search(q, 25))
        )
        if (ms > worst.ms) worst = { ms, text: q }
        // The bound every request keeps (50 ms); on an idle machine the slowest found take 20–28 ms, and a machine
        // running other tests beside this one has pushed one past 30.
        return ms <= 50
      }),
      { numRuns: 300, seed: 47 }
    )
    console.log(`slowest of 300 texts: ${worst.ms.toFixed(1)} ms CPU for ${JSON.stringify(worst.text.slice(0, 80))}`)
  })
})
