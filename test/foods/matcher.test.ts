import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { FoodDb } from "../../src/foods/core/FoodDb.ts"
import { FoodDbEmpty, FoodDbMemory } from "../../src/foods/core/FoodDbLive.ts"
import { buildIndex, matchIn } from "../../src/foods/core/matcher.ts"
import type { FoodRecord } from "../../src/foods/core/records.ts"
import { readDatasets } from "../../src/foods/core/sources.ts"
import { DEV_FOODS } from "./devset.ts"
import { evaluateDishes, evaluateFoods, foldOf, HELD_OUT_FOODS, NUTRIENTS, nameCentredGuesses, TUNING_FOODS, truthOf, typicalIn } from "./evaluate.ts"
import { hasSr28, SR28_DIR, sr28Notice } from "./paths.ts"

const record = (sourceId: string, description: string, kcal: number, extra: Partial<FoodRecord> = {}): FoodRecord => ({
  source: "sr28",
  sourceId,
  dataType: "sr28",
  description,
  foodGroup: null,
  commonNames: null,
  descriptors: null,
  manufacturer: null,
  surveyed: true,
  per100g: { kcal, protein_g: 0, carbs_g: 0, fat_g: 0 },
  portions: [],
  ...extra
})

const SMALL: ReadonlyArray<FoodRecord> = [
  record("20044", "Rice, white, long-grain, regular, raw, enriched", 365, { foodGroup: "Cereal Grains and Pasta" }),
  record("20045", "Rice, white, long-grain, regular, enriched, cooked", 130, { foodGroup: "Cereal Grains and Pasta" }),
  record("11090", "Broccoli, raw", 34),
  record("11091", "Broccoli, cooked, boiled, drained, without salt", 35),
  record("11403", "Potatoes, french fried, all types, salt added in processing, frozen, home-prepared, oven heated", 158),
  record("21138", "Fast foods, potato, french fried in vegetable oil", 312, { foodGroup: "Fast Foods" }),
  record("21250", "McDONALD'S, french fries", 323, { foodGroup: "Fast Foods", surveyed: false }),
  record("04053", "Oil, olive, salad or cooking", 884, { per100g: { kcal: 884, protein_g: 0, carbs_g: 0, fat_g: 100 } }),
  record("44005", "Oil, corn, peanut, and olive", 884, { per100g: { kcal: 884, protein_g: 0, carbs_g: 0, fat_g: 100 } }),
  record("11674", "Potatoes, baked, flesh and skin, without salt", 93, { per100g: { kcal: 93, protein_g: 2.5, carbs_g: 21.2, fat_g: 0.1 } }),
  record("09181", "Melons, cantaloupe, raw", 34),
  record("18351", "Rolls, hamburger or hotdog, mixed-grain", 263),
  record("21107", "Fast foods, hamburger; single, regular patty; plain", 297, { foodGroup: "Fast Foods" }),
  record("07908", "Luncheon meat, pork with ham, minced, canned, includes SPAM (Hormel)", 315, { manufacturer: "Hormel Foods Corporation" }),
  record("07029", "Ham, sliced, regular (approximately 11% fat)", 163),
  record("18022", "Bread, cornbread, dry mix, enriched (includes corn muffin mix)", 418),
  record("18023", "Bread, cornbread, dry mix, prepared with 2% milk, 80% margarine, and eggs", 330),
  record("01132", "Egg, whole, cooked, scrambled", 149),
  record("01123", "Egg, whole, raw, fresh", 143),
  record("43015", "Salad dressing, caesar dressing, regular", 542)
]

const guess = (kcal: number) => ({ kcal, protein_g: 0, carbs_g: 0, fat_g: 0 })

const matchSmall = (query: string, kcal: number) => Option.map(matchIn(buildIndex(SMALL), { query, guessPer100g: guess(kcal) }), (m) => m.fdcId)

describe("matcher on a handful of records", () => {
  it("prefers the cooked record when the guess says cooked, and the dry one only when asked", () => {
    expect(matchSmall("white rice", 140)).toEqual(Option.some("20045"))
    expect(matchSmall("uncooked white rice", 360)).toEqual(Option.some("20044"))
  })

  it("weighs the named preparation: steamed broccoli is the boiled record, scrambled eggs the scrambled one", () => {
    expect(matchSmall("steamed broccoli", 35)).toEqual(Option.some("11091"))
    expect(matchSmall("scrambled eggs", 160)).toEqual(Option.some("01132"))
  })

  it("maps common names to USDA wording and prefers generic records to branded ones", () => {
    const fries = matchSmall("french fries", 300)
    expect(fries).toEqual(Option.some("21138"))
  })

  it("reads the menu's word order and USDA's: olive oil is the olive oil record, not a blend that contains olive", () => {
    const oil = { kcal: 850, protein_g: 0, carbs_g: 0, fat_g: 95 }
    for (const query of ["olive oil", "oil, olive", "extra virgin olive oil"]) {
      expect(Option.map(matchIn(buildIndex(SMALL), { query, guessPer100g: oil }), (m) => m.fdcId)).toEqual(Option.some("04053"))
    }
  })

  it("vetoes a record when one macronutrient is far from the guess, even if the energy agrees", () => {
    const potatoes = (fat_g: number) => matchIn(buildIndex(SMALL), { query: "roasted potatoes", guessPer100g: { kcal: 110, protein_g: 2.4, carbs_g: 18, fat_g } })
    expect(Option.map(potatoes(0.3), (m) => m.fdcId)).toEqual(Option.some("11674"))
    // Potatoes roasted in oil (6 g fat) are not plain baked potatoes (0.1 g): the item keeps the guess.
    expect(potatoes(6)).toEqual(Option.none())
  })

  it("takes USDA's specific name after a class head, but not after any head", () => {
    expect(matchSmall("cantaloupe", 34)).toEqual(Option.some("09181"))
    // "Rolls, hamburger or hotdog" is a roll: the hamburger record wins although the roll is nearer the guess.
    expect(matchSmall("hamburger", 270)).toEqual(Option.some("21107"))
  })

  it("matches a brand the query names and prefers the prepared food to its dry mix", () => {
    expect(matchSmall("spam", 300)).toEqual(Option.some("07908"))
    expect(matchSmall("cornbread", 330)).toEqual(Option.some("18023"))
  })

  it("repairs a misspelt word through the search index's fuzzy suggestions", () => {
    expect(matchSmall("steamed brocolli", 35)).toEqual(Option.some("11091"))
  })

  it("answers None for foods it does not know and for a guess that disagrees with every candidate", () => {
    expect(matchSmall("chicken tikka masala", 150)).toEqual(Option.none())
    // A caesar salad is not caesar dressing: the words overlap, the energy does not.
    expect(matchSmall("caesar salad", 190)).toEqual(Option.none())
    // Every rice record is far below 900 kcal/100 g: the item keeps the model's numbers.
    expect(matchSmall("white rice", 900)).toEqual(Option.none())
  })
})

const macros = (kcal: number, protein_g: number, carbs_g: number, fat_g: number) => ({ kcal, protein_g, carbs_g, fat_g })

const PREPARED: ReadonlyArray<FoodRecord> = [
  record("05098", "Chicken, broilers or fryers, thigh, meat only, cooked, roasted", 179, { foodGroup: "Poultry Products", per100g: macros(179, 24.8, 0, 8.2) }),
  record("05097", "Chicken, broilers or fryers, thigh, meat only, cooked, fried", 218, { foodGroup: "Poultry Products", surveyed: false, per100g: macros(218, 28.2, 1.2, 10.3) }),
  record("11363", "Potatoes, baked, flesh, without salt", 93, { per100g: macros(93, 2, 21.6, 0.1) }),
  record("11371", "Potatoes, mashed, home-prepared, whole milk and margarine added", 113, { per100g: macros(113, 2, 16.9, 4.2) }),
  record("20010", "Buckwheat groats, roasted, cooked", 92, { foodGroup: "Cereal Grains and Pasta", commonNames: "kasha", per100g: macros(92, 3.4, 19.9, 0.6) }),
  record("11300", "Peas, edible-podded, raw", 42, { commonNames: "Snowpeas, Sugar snap peas", per100g: macros(42, 2.8, 7.6, 0.2) }),
  record("11304", "Peas, green, raw", 81, { per100g: macros(81, 5.4, 14.5, 0.4) }),
  record("02068", "Vinegar, red wine", 19, { per100g: macros(19, 0, 0.3, 0) }),
  record("14096", "Alcoholic beverage, wine, table, red", 85, { per100g: macros(85, 0.1, 2.6, 0) })
]

const matchPrepared = (query: string, guess: ReturnType<typeof macros>) => Option.map(matchIn(buildIndex(PREPARED), { query, guessPer100g: guess }), (m) => m.fdcId)

describe("matcher on preparations and SR28's other names", () => {
  it("follows the named cooking method over the usual record: fried chicken thigh is the fried one", () => {
    expect(matchPrepared("fried chicken thigh", macros(200, 26, 1, 9))).toEqual(Option.some("05097"))
    expect(matchPrepared("chicken thigh", macros(200, 26, 1, 9))).toEqual(Option.some("05098"))
  })

  it("lets the form follow the words: potatoes are not mashed ones unless the query says so", () => {
    // The guess sits nearer the mashed record; only the words tell the two apart.
    const guess = macros(105, 2.2, 18, 2.5)
    expect(matchPrepared("potatoes", guess)).toEqual(Option.some("11363"))
    expect(matchPrepared("roasted potatoes", guess)).toEqual(Option.some("11363"))
    expect(matchPrepared("mashed potatoes", guess)).toEqual(Option.some("11371"))
  })

  it("reads SR28's other names and compound words: kasha, snow peas, red wine vinegar", () => {
    expect(matchPrepared("kasha", macros(100, 3, 20, 1))).toEqual(Option.some("20010"))
    expect(matchPrepared("snow peas", macros(45, 3, 8, 0.3))).toEqual(Option.some("11300"))
    expect(matchPrepared("red wine vinegar", macros(20, 0, 0.5, 0))).toEqual(Option.some("02068"))
  })
})

const nut = (sourceId: string, name: string, kcal: number, protein_g: number, fat_g: number) =>
  record(sourceId, `Nuts, ${name}`, kcal, { foodGroup: "Nut and Seed Products", per100g: macros(kcal, protein_g, 20, fat_g) })

const NUTS: ReadonlyArray<FoodRecord> = [
  nut("12061", "almonds", 579, 21.2, 49.9),
  nut("12087", "cashew nuts, raw", 553, 18.2, 43.9),
  nut("12120", "hazelnuts or filberts", 628, 15, 60.8),
  nut("12155", "walnuts, english", 654, 15.2, 65.2),
  nut("12151", "pistachio nuts, raw", 560, 20.2, 45.3),
  nut("12195", "almond butter, plain, without salt added", 614, 21, 55.5)
]

describe("generic names", () => {
  it("stand for the median per 100 g of the family members nearest the guess, reported with the member nearest it", () => {
    const found = matchIn(buildIndex(NUTS), { query: "NUTS", guessPer100g: macros(600, 18, 20, 52) })
    // The five nuts fit the guess (the nut butter is a product, not a nut); the median is of the nearer half of them, at
    // least three: cashews, pistachios and almonds, 560 kcal, 20.2 g protein, 45.3 g fat — the pistachios' values.
    expect(Option.map(found, (m) => [m.fdcId, m.per100g])).toEqual(Option.some(["12151", macros(560, 20.2, 20, 45.3)]))
    expect(Option.map(found, (m) => m.name)).toEqual(Option.some("Nuts, pistachio nuts, raw (median of 3 USDA nuts records)"))
    // A guess of fattier nuts takes the fattier half: hazelnuts, walnuts and almonds.
    const fatty = matchIn(buildIndex(NUTS), { query: "nuts", guessPer100g: macros(640, 15, 20, 62) })
    expect(Option.map(fatty, (m) => m.per100g.kcal)).toEqual(Option.some(628))
  })

  it("take only members cooked as the query says: baked beans are not the median of boiled ones", () => {
    const bean = (sourceId: string, name: string, kcal: number, protein_g: number) =>
      record(sourceId, `Beans, ${name}, mature seeds, cooked, boiled, without salt`, kcal, { foodGroup: "Legumes and Legume Products", per100g: macros(kcal, protein_g, 24, 0.5) })
    const beans = buildIndex([
      bean("16015", "black", 132, 8.9),
      bean("16028", "kidney, all types", 127, 8.7),
      bean("16043", "pinto", 143, 9),
      record("16006", "Beans, baked, canned, plain or vegetarian", 94, { foodGroup: "Legumes and Legume Products", per100g: macros(94, 4.8, 21, 0.4) })
    ])
    const guess = macros(110, 6.5, 22, 0.5)
    expect(Option.map(matchIn(beans, { query: "beans", guessPer100g: guess }), (m) => [m.fdcId, m.per100g.kcal])).toEqual(Option.some(["16015", 132]))
    expect(Option.map(matchIn(beans, { query: "baked beans", guessPer100g: guess }), (m) => m.fdcId)).toEqual(Option.some("16006"))
  })

  it("keep the model's numbers when the guess fits too few members, and leave a named nut to its own record", () => {
    expect(matchIn(buildIndex(NUTS), { query: "nuts", guessPer100g: macros(150, 5, 20, 5) })).toEqual(Option.none())
    expect(Option.map(matchIn(buildIndex(NUTS), { query: "walnuts", guessPer100g: macros(640, 15, 14, 64) }), (m) => m.fdcId)).toEqual(Option.some("12155"))
  })
})

describe("the dev set's split", () => {
  it("keeps every query of one food in one fold and holds out about a fifth of the foods", () => {
    const folds = new Map<string, Set<number>>()
    for (const food of DEV_FOODS) folds.set(food.ndb ?? food.query, (folds.get(food.ndb ?? food.query) ?? new Set()).add(foldOf(food)))
    for (const [, seen] of folds) expect(seen.size).toBe(1)
    expect(HELD_OUT_FOODS.length + TUNING_FOODS.length).toBe(DEV_FOODS.length)
    expect(HELD_OUT_FOODS.length / DEV_FOODS.length).toBeGreaterThan(0.12)
    expect(HELD_OUT_FOODS.length / DEV_FOODS.length).toBeLessThan(0.28)
  })
})

describe("FoodDb layers", () => {
  it.effect("FoodDbMemory matches from its records and FoodDbEmpty never matches", () =>
    Effect.gen(function* () {
      const memory = yield* Effect.provide(FoodDb, FoodDbMemory(SMALL))
      const found = yield* memory.match({ query: "white rice", guessPer100g: guess(130) })
      expect(Option.map(found, (m) => [m.fdcId, m.name, m.per100g.kcal])).toEqual(
        Option.some(["20045", "Rice, white, long-grain, regular, enriched, cooked", 130])
      )
      expect(memory.matcherVersion).toMatch(/^usda-match-\d+$/)
      const empty = yield* Effect.provide(FoodDb, FoodDbEmpty)
      expect(yield* empty.match({ query: "white rice", guessPer100g: guess(130) })).toEqual(Option.none())
    }))
})

sr28Notice()
describe.skipIf(!hasSr28)("matcher on the full SR28 set", () => {
  const load = async () => {
    const [sr28] = await readDatasets(SR28_DIR, () => {})
    return buildIndex(sr28!.records)
  }
  let index: ReturnType<typeof buildIndex> | undefined
  const getIndex = async () => {
    index ??= await load()
    return index
  }

  it("writes each dev food's values as its SR28 record has them", async () => {
    const idx = await getIndex()
    const byId = new Map(idx.foods.map((food) => [food.record.sourceId, food.record.per100g]))
    for (const food of DEV_FOODS) {
      if (food.ndb === null) continue
      const record = byId.get(food.ndb)
      expect(record, food.query).toBeDefined()
      const truth = truthOf(food)
      for (const key of NUTRIENTS) expect(Math.abs(record![key] - truth[key]), `${food.query} ${key}`).toBeLessThanOrEqual(0.01)
    }
  })

  // The evaluation is seeded, so these floors are the measured figures (rounded), not estimates. The held-out fifth
  // is the honest one: the matcher was never tuned on its foods. 97 foods and 41 dishes were added
  // of the kinds real photos were missed on; the floors are what the grown set shows, lower than the old set's.
  it("holds the accuracy floors on the tuned four fifths and on the held-out fifth of the dev set", async () => {
    const idx = await getIndex()
    const tuned = evaluateFoods((query) => matchIn(idx, query), 5, 42, TUNING_FOODS)
    expect(tuned.accuracy).toBeGreaterThanOrEqual(0.91)
    expect(tuned.matchedShare).toBeGreaterThanOrEqual(0.98)
    expect(tuned.abstainedShare).toBeGreaterThanOrEqual(0.96)
    const heldOut = evaluateFoods((query) => matchIn(idx, query), 5, 42, HELD_OUT_FOODS)
    expect(heldOut.accuracy).toBeGreaterThanOrEqual(0.915)
    expect(heldOut.matchedShare).toBeGreaterThanOrEqual(0.985)
  })

  it("keeps the dish totals of the held-out fifth within 2.5 % energy, 3.2 % protein, 2.8 % carbohydrate and 2.7 % fat", async () => {
    const idx = await getIndex()
    const dishes = evaluateDishes((query) => matchIn(idx, query), 40, 7, HELD_OUT_FOODS)
    expect(dishes.matcher.kcal).toBeLessThanOrEqual(0.025)
    expect(dishes.matcher.protein_g).toBeLessThanOrEqual(0.032)
    expect(dishes.matcher.carbs_g).toBeLessThanOrEqual(0.028)
    expect(dishes.matcher.fat_g).toBeLessThanOrEqual(0.027)
    for (const key of NUTRIENTS) expect(dishes.matcher[key]).toBeLessThan(dishes.guessOnly[key] * 0.2)
    // The rest are dishes SR28 lacks (chicken shawarma, chana masala, …), which keep the model's numbers.
    expect(dishes.matchedGramShare).toBeGreaterThanOrEqual(0.915)
    expect(dishes.matchedFittingGramShare).toBeGreaterThanOrEqual(0.999)
  })

  it("keeps the dish totals of the tuned four fifths within 3.6 % energy, 4.4 % protein, 2.9 % carbohydrate and 5.8 % fat", async () => {
    const idx = await getIndex()
    const dishes = evaluateDishes((query) => matchIn(idx, query), 40, 7, TUNING_FOODS)
    expect(dishes.matcher.kcal).toBeLessThanOrEqual(0.036)
    expect(dishes.matcher.protein_g).toBeLessThanOrEqual(0.044)
    expect(dishes.matcher.carbs_g).toBeLessThanOrEqual(0.029)
    expect(dishes.matcher.fat_g).toBeLessThanOrEqual(0.058)
    for (const key of NUTRIENTS) expect(dishes.matcher[key]).toBeLessThan(dishes.guessOnly[key] * 0.4)
    expect(dishes.matchedFittingGramShare).toBeGreaterThanOrEqual(0.966)
  })

  // Guesses centred where a model's are (evaluate.ts, nameCentredGuesses): drawn towards what the name means in
  // general, not only towards the expected record. These figures are the ones to compare with dishes never seen.
  it("holds its floors when the guesses lean on what the name means rather than on the answer", async () => {
    const idx = await getIndex()
    const guesses = nameCentredGuesses(typicalIn(idx))
    const match = (query: Parameters<typeof matchIn>[1]) => matchIn(idx, query)
    expect(evaluateFoods(match, 5, 42, TUNING_FOODS, guesses).accuracy).toBeGreaterThanOrEqual(0.91)
    expect(evaluateFoods(match, 5, 42, HELD_OUT_FOODS, guesses).accuracy).toBeGreaterThanOrEqual(0.905)
    const heldOut = evaluateDishes(match, 40, 7, HELD_OUT_FOODS, guesses)
    expect(heldOut.matcher.kcal).toBeLessThanOrEqual(0.038)
    expect(heldOut.matcher.fat_g).toBeLessThanOrEqual(0.042)
    expect(evaluateDishes(match, 40, 7, TUNING_FOODS, guesses).matcher.fat_g).toBeLessThanOrEqual(0.062)
  })

  it("prices a plain name as the food, not a product made of it, and a generic one among the members its guess fits", async () => {
    const idx = await getIndex()
    // A model's typical tofu sits as near fuyu (116 kcal, 8 g fat) as near plain tofu.
    const tofu = Option.getOrThrow(matchIn(idx, { query: "tofu", guessPer100g: macros(110, 10, 3, 6) }))
    expect(tofu.name).toMatch(/^Tofu, (?:raw|hard|firm)/)
    expect(tofu.name).not.toMatch(/fermented|fuyu|fried/)
    // Fish the model saw as lean: priced among lean fish, not at the median of every species (124 kcal).
    const fish = Option.getOrThrow(matchIn(idx, { query: "fish", guessPer100g: macros(95, 20, 0, 1.5) }))
    expect(fish.name).toMatch(/\(median of \d+ USDA fish records\)$/)
    expect(fish.per100g.kcal).toBeLessThan(115)
    const oily = Option.getOrThrow(matchIn(idx, { query: "fish", guessPer100g: macros(200, 21, 0, 12) }))
    expect(oily.per100g.kcal).toBeGreaterThan(150)
  })

  it("prices a generic fish among the species people eat, and a roast side as roasted, never as mashed", async () => {
    const idx = await getIndex()
    const match = (query: string, guess: ReturnType<typeof macros>) => Option.getOrThrow(matchIn(idx, { query, guessPer100g: guess }))
    // SR28's survey flag marks the foods people eat: cod, pollock, tilapia, salmon…, not lingcod, cusk or burbot.
    const everyday = ["cod", "flatfish", "herring", "pollock", "rockfish", "salmon", "sturgeon", "whiting", "mackerel", "catfish", "tilapia"]
    for (const guess of [macros(95, 20, 0, 1.5), macros(130, 22, 0, 4), macros(200, 21, 0, 12)]) {
      const fish = match("fish", guess)
      expect(fish.name).toMatch(/\(median of \d+ USDA fish records\)$/)
      expect(everyday.some((species) => fish.name.startsWith(`Fish, ${species}`)), fish.name).toBe(true)
    }
    // Roast potatoes, done in oil, sit nearer mashed ones (5 g fat) than baked ones: still no mashed record.
    for (const query of ["roast potatoes", "roasted potatoes", "potatoes, roasted"]) {
      const side = match(query, macros(150, 2.5, 22, 6))
      expect(side.name, query).not.toMatch(/mashed/)
      expect(side.name, query).toMatch(/^Potatoes, .*(?:roasted|baked)/)
    }
  })

  it("answers generic names with their family's median, named after the member nearest it", async () => {
    const idx = await getIndex()
    const generic = (query: string, guess: ReturnType<typeof macros>) => Option.getOrThrow(matchIn(idx, { query, guessPer100g: guess }))
    const seafood = generic("seafood", macros(130, 22, 2, 3))
    expect(seafood.name).toMatch(/^(?:Fish|Crustaceans|Mollusks), .* \(median of \d+ USDA seafood records\)$/)
    expect(seafood.per100g.kcal).toBeGreaterThan(90)
    expect(seafood.per100g.kcal).toBeLessThan(180)
    expect(seafood.per100g.protein_g).toBeGreaterThan(18)
    const berries = generic("Mixed Berries", macros(50, 0.8, 12, 0.4))
    expect(berries.name).toMatch(/berries, raw \(median of \d+ USDA berries records\)$/)
    const greens = generic("leafy greens", macros(25, 2.5, 4, 0.4))
    expect(greens.name).toMatch(/, raw \(median of \d+ USDA leafy greens records\)$/)
    expect(greens.per100g.kcal).toBeLessThan(35)
    // "Mixed nuts" is a record of its own, not the family's median.
    expect(generic("mixed nuts", macros(600, 19, 22, 53)).name).toMatch(/^Nuts, mixed nuts, /)
  })

  it("reads a last word of form or part as the food before it, but not a dish's name", async () => {
    const idx = await getIndex()
    const id = (query: string, guess: ReturnType<typeof macros>) => Option.map(matchIn(idx, { query, guessPer100g: guess }), (m) => m.fdcId)
    expect(id("celery sticks", macros(16, 0.7, 3, 0.2))).toEqual(Option.some("11143"))
    expect(id("crab meat", macros(85, 18, 0, 0.8))).toEqual(Option.some("15140"))
    // A dish's name changes what 100 g holds: the usual chicken or egg is far from the estimate, and the guess stands.
    expect(id("chicken curry", macros(150, 12, 6, 8.5))).toEqual(Option.none())
    expect(id("egg sandwich", macros(250, 11, 25, 12))).toEqual(Option.none())
    expect(id("caesar salad", macros(190, 4.5, 6, 16.5))).toEqual(Option.none())
    expect(id("sushi roll", macros(150, 5, 28, 2))).toEqual(Option.none())
    // Other names in a description's asides are searched; dry roasting is roasting; hard-boiled is boiled.
    expect(id("tamari", macros(60, 10, 5.6, 0.1))).toEqual(Option.some("16124"))
    expect(id("boiled eggs", macros(155, 12.6, 1.1, 10.6))).toEqual(Option.some("01129"))
  })

  it("leaves an item unmatched when the guess disagrees strongly with every candidate", async () => {
    const idx = await getIndex()
    expect(matchIn(idx, { query: "white rice", guessPer100g: { kcal: 900, protein_g: 1, carbs_g: 20, fat_g: 95 } })).toEqual(Option.none())
    expect(matchIn(idx, { query: "steamed broccoli", guessPer100g: { kcal: 400, protein_g: 10, carbs_g: 40, fat_g: 20 } })).toEqual(Option.none())
    // The same queries with plausible guesses do match.
    expect(Option.isSome(matchIn(idx, { query: "white rice", guessPer100g: { kcal: 150, protein_g: 3, carbs_g: 30, fat_g: 0.5 } }))).toBe(true)
  })

  it("answers in well under a millisecond per query (median)", async () => {
    const idx = await getIndex()
    const times: Array<number> = []
    for (const query of ["grilled chicken breast", "white rice", "olive oil", "french fries", "whole milk yogurt", "spaghetti bolognese"]) {
      for (let i = 0; i < 20; i++) {
        const start = performance.now()
        matchIn(idx, { query, guessPer100g: { kcal: 150, protein_g: 10, carbs_g: 10, fat_g: 5 } })
        times.push(performance.now() - start)
      }
    }
    times.sort((a, b) => a - b)
    // Generous bound for a busy CI machine; `npm run bench` reports the real figures.
    expect(times[Math.floor(times.length / 2)]).toBeLessThan(5)
  })
})
