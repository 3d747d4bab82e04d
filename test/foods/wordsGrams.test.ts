// CONTRACT "A meal in words" on the shipped SR28 copy: each food's record (the unit is evidence), its grams and how
// they were found (stated, portion, typical), and what stays unmatched.
import { describe, expect, it } from "vitest"
import { buildIndex } from "../../src/foods/core/matcher.ts"
import { searchIn, trustedIn } from "../../src/foods/core/search.ts"
import { shippedFoods } from "../../src/foods/core/shipped.ts"
import { mealOf, SUGGESTION_SEARCHES } from "../../src/foods/core/words/meal.ts"

const index = buildIndex(shippedFoods())
let searches = 0
const reader = {
  trusted: (text: string, limit: number) => trustedIn(index, text, limit),
  search: (text: string, limit: number) => {
    searches++
    return searchIn(index, text, limit)
  }
}

/** Each food as the answer shows it: its record, grams, basis and portion; or "unmatched" with its suggestions. */
const meal = (text: string) =>
  mealOf(reader, text, 20).priced.map((p) =>
    "record" in p
      ? { text: p.food.text, name: p.record.description, grams: p.grams, basis: p.basis, portion: p.portion }
      : { text: p.food.text, unmatched: p.suggestions.map((s) => s.description) }
  )
const only = (text: string) => {
  const foods = meal(text)
  expect(foods.length, text).toBe(1)
  return foods[0] as { text: string; name?: string; grams?: number; basis?: string; portion?: { amount: number; unit: string; grams: number }; unmatched?: Array<string> }
}

describe("a meal in words, priced on the shipped SR28 copy", () => {
  it("a weight is as stated; a measuring volume goes through the food's own volume portion", () => {
    expect(only("150 g rice, cooked")).toMatchObject({ name: "Rice, white, long-grain, regular, enriched, cooked", grams: 150, basis: "stated" })
    expect(only("3 oz chicken breast")).toMatchObject({ grams: 85.05, basis: "stated" })
    expect(only("1 lb ground beef")).toMatchObject({ grams: 453.59, basis: "stated" })
    expect(only("0.25 kg rice")).toMatchObject({ grams: 250, basis: "stated" })
    // Olive oil's own tablespoon is 13.5 g; its cup 216 g.
    expect(only("1 tbsp olive oil")).toMatchObject({ name: "Oil, olive, salad or cooking", grams: 13.5, basis: "stated", portion: { amount: 1, unit: "tablespoon", grams: 13.5 } })
    expect(only("2 tablespoons olive oil")).toMatchObject({ grams: 27 })
    expect(only("half a cup of oatmeal")).toMatchObject({ basis: "stated", portion: { amount: 0.5 } })
    expect(only("half a cup of oatmeal").name).toMatch(/oats.*(?:cooked|prepared)/i)
    // Milk has a cup (244 g) and no ml: 250 ml is 250 × 244 / 236.6.
    expect(only("250 ml milk")).toMatchObject({ name: expect.stringMatching(/^Milk, whole/), grams: 257.82, basis: "stated" })
    expect(only("1 cup milk")).toMatchObject({ grams: 244, basis: "stated" })
  })

  it("a container the food has no portion for is a volume (glass 240 ml); one it has is its portion", () => {
    const milk = only("a glass of milk")
    expect(milk).toMatchObject({ basis: "portion", portion: { amount: 1, unit: "glass (240 ml)" } })
    expect(milk.grams).toBeCloseTo((240 * 244) / 236.6, 1)
    expect(only("a can of coke")).toMatchObject({ name: "Beverages, carbonated, cola, regular", grams: 370, basis: "portion", portion: { unit: "can or bottle (12 fl oz)" } })
    expect(only("a mug of tea").basis).toBe("portion")
  })

  it("a household word is that portion of the food; a count without a unit that many pieces (medium where it has one)", () => {
    expect(only("2 large eggs")).toMatchObject({ name: "Egg, whole, raw, fresh", grams: 100, basis: "portion", portion: { amount: 2, unit: "large", grams: 100 } })
    expect(only("2 eggs")).toMatchObject({ grams: 88, basis: "portion", portion: { amount: 2, unit: "medium" } })
    expect(only("an apple")).toMatchObject({ name: "Apples, raw, with skin", grams: 182, basis: "portion" })
    expect(only("1 banana")).toMatchObject({ grams: 118, basis: "portion" })
    expect(only("a slice of toast")).toMatchObject({ grams: 22, basis: "portion", portion: { amount: 1, unit: "slice" } })
    expect(only("3 strips of bacon").basis).toBe("portion")
    expect(only("2 chicken breasts")).toMatchObject({ basis: "portion", portion: { amount: 2 } })
  })

  it("no amount is one typical serving: a pat of butter, a teaspoon of sugar, a slice of bread, a cup of coffee", () => {
    expect(only("butter")).toMatchObject({ name: "Butter, salted", grams: 5, basis: "typical" })
    expect(only("sugar")).toMatchObject({ grams: 4.2, basis: "typical" })
    expect(only("toast")).toMatchObject({ grams: 22, basis: "typical", portion: { unit: "slice" } })
    expect(only("coffee")).toMatchObject({ name: "Beverages, coffee, brewed, prepared with tap water", grams: 237, basis: "typical" })
    expect(only("some rice")).toMatchObject({ grams: 158, basis: "typical" })
  })

  it("a unit is evidence for the record: a slice of pizza is a pizza that has a slice; a cup of coffee is brewed coffee", () => {
    const pizza = only("two slices of pizza")
    expect(pizza.name).toMatch(/^Pizza/)
    expect(pizza).toMatchObject({ basis: "portion", portion: { amount: 2 } })
    expect(pizza.portion?.unit).toMatch(/^slice/)
    expect(only("a cup of coffee").name).toBe("Beverages, coffee, brewed, prepared with tap water")
  })

  it("a serving is one a person eats: no whole fruit or package, a cup of what is eaten by the handful", () => {
    // A whole pineapple (905 g) is no piece one eats; a family bag of chips (8 oz) no single bag.
    expect(only("pineapple").grams).toBeLessThan(300)
    expect(only("a small bag of chips")).toMatchObject({ name: "Snacks, potato chips, plain, salted", grams: 28 })
    // One grape is no serving of grapes; ten of them are ten.
    expect(only("grapes").grams).toBeGreaterThan(80)
    expect(only("10 grapes").grams).toBeLessThan(60)
    expect(only("1 scoop vanilla ice cream")).toMatchObject({ name: "Ice creams, vanilla", grams: 66 })
    expect(only("a slice of watermelon")).toMatchObject({ name: "Watermelon, raw", grams: 286 })
    expect(only("2 slices of pepperoni pizza").name).toMatch(/pepperoni/i)
  })

  it("reads everyday names in USDA's words", () => {
    expect(only("ranch").name).toMatch(/^Salad dressing, ranch/)
    expect(only("bbq sauce").name).toBe("Sauce, barbecue")
    expect(only("a diet coke").name).toMatch(/cola/i)
    expect(only("a diet coke").name).not.toBe("Beverages, carbonated, cola, regular")
    expect(only("a cheese stick").name).toMatch(/mozzarella/i)
    expect(only("greek yogurt").name).toMatch(/^Yogurt, Greek, plain/)
    expect(only("cornflakes").name).toMatch(/Corn Flakes/)
    expect(only("OJ").name).toMatch(/^Orange juice/)
    expect(only("2 eggs over easy").name).toBe("Egg, whole, cooked, fried")
    expect(only("half and half").name).toBe("Cream, fluid, half and half")
    expect(only("a chocolate bar").name).toBe("Candies, milk chocolate")
    // A weight of oats is dry oats; vegetables served are cooked.
    expect(only("40g oats")).toMatchObject({ name: "Cereals, oats, regular and quick, not fortified, dry", grams: 40 })
    expect(only("green beans").name).toMatch(/^Beans, snap, green, cooked/)
    expect(only("1 cup peas").name).toMatch(/^Peas, green, cooked/)
    expect(only("a ham and cheese sandwich").name).toMatch(/submarine sandwich/)
    expect(only("a turkey and swiss sandwich on wheat").name).toMatch(/submarine sandwich, turkey/)
  })

  it("a food nothing matches is unmatched with its words and suggestions of its kind; so is a unit the food cannot take", () => {
    const cortado = only("a cortado")
    expect(cortado.text).toBe("a cortado")
    expect(cortado.unmatched?.length).toBeGreaterThan(0)
    for (const s of cortado.unmatched ?? []) expect(s).toMatch(/coffee/i)
    // A latte is a milk coffee: SR28's ready-to-drink milk-based coffee prices it.
    expect(only("a latte").name).toMatch(/coffee.*milk based/i)
    expect(only("sushi").unmatched?.length).toBeGreaterThan(0)
    expect(only("2 scoops of rice")).toMatchObject({ unmatched: expect.any(Array) })
  })

  it(`bounds the suggestion searches of one call (${SUGGESTION_SEARCHES}) whatever its unknown words`, () => {
    const unknown = Array.from({ length: 20 }, (_, i) => `zq${"x".repeat(i)}v qwzz${i}`).join(", ")
    searches = 0
    const foods = meal(unknown)
    expect(foods.length).toBe(20)
    expect(foods.every((f) => "unmatched" in f)).toBe(true)
    expect(searches).toBeLessThanOrEqual(SUGGESTION_SEARCHES)
  })
})
