// CONTRACT "A meal in words": how a text is read into foods and amounts, rule by rule, before any food is matched.
import { describe, expect, it } from "vitest"
import { readMeal } from "../../src/foods/core/words/read.ts"

/** Each food as [text, query, amount, unit]: what a person can check against what they wrote. */
const read = (text: string) => readMeal(text).map((f) => [f.text, f.query, f.amount ?? null, f.unit?.name ?? null])
const one = (text: string) => {
  const foods = readMeal(text)
  expect(foods.length, text).toBe(1)
  return { amount: foods[0]?.amount ?? null, unit: foods[0]?.unit?.name ?? null, kind: foods[0]?.unit?.kind ?? null, query: foods[0]?.query }
}

describe("a meal in words is cut into foods", () => {
  it("at commas, and, with, &, plus, semicolons, sentences, new lines and bullets", () => {
    expect(read("2 eggs, a slice of toast with butter and a latte")).toEqual([
      ["2 eggs", "eggs", 2, null],
      ["a slice of toast", "toast", 1, "slice"],
      ["butter", "butter", null, null],
      ["a latte", "latte", 1, null]
    ])
    expect(read("rice & beans; a coke. Then an apple plus a pear\n- 2 cookies\n* tea\n• jam\n1. toast\n2) honey").map((f) => f[1])).toEqual([
      "rice",
      "beans",
      "coke",
      "apple",
      "pear",
      "cookies",
      "tea",
      "jam",
      "toast",
      "honey"
    ])
  })

  it("never reads filler as a food", () => {
    expect(read("For lunch I had a turkey sandwich, an apple and a glass of milk")).toEqual([
      ["a turkey sandwich", "turkey sandwich", 1, null],
      ["an apple", "apple", 1, null],
      ["a glass of milk", "milk", 1, "glass"]
    ])
    expect(read("I ate some rice and a bit of butter for dinner today")).toEqual([
      ["rice", "rice", null, null],
      ["butter", "butter", null, null]
    ])
    expect(read("I had nothing else, that was it.")).toEqual([])
    expect(read("about 150 g chicken, around 2 cups of rice, approximately 1 banana, ~30 g cheese").map((f) => [f[1], f[2]])).toEqual([
      ["chicken", 150],
      ["rice", 2],
      ["banana", 1],
      ["cheese", 30]
    ])
  })

  it("keeps words after a comma that only describe the food, and names that hold 'and'", () => {
    expect(read("150 g rice, cooked")).toEqual([["150 g rice, cooked", "rice, cooked", 150, "g"]])
    expect(read("rice, white, long-grain, 1 cup milk")).toEqual([
      ["rice, white, long-grain", "rice, white, long-grain", null, null],
      ["1 cup milk", "milk", 1, "cup"]
    ])
    expect(read("mac and cheese and a coke").map((f) => f[1])).toEqual(["mac and cheese", "coke"])
    expect(read("2 eggs, fried rice").map((f) => f[1])).toEqual(["eggs", "fried rice"])
  })

  it("reads a word after a comma that is itself a food as a new food, and an amount after a comma as the food's", () => {
    expect(read("toast, butter, jam").map((f) => f[1])).toEqual(["toast", "butter", "jam"])
    expect(read("an orange, water").map((f) => f[1])).toEqual(["orange", "water"])
    expect(read("broccoli, cooked in butter").map((f) => f[1])).toEqual(["broccoli, cooked in butter"])
    expect(read("lunch was leftover pizza, 2 slices, and a diet coke")).toEqual([
      ["pizza, 2 slices", "pizza", 2, "slice"],
      ["a diet coke", "diet coke", 1, null]
    ])
  })

  it("drops meal labels and what says when or where a food was eaten", () => {
    expect(read("Lunch: ham sandwich, an orange").map((f) => f[1])).toEqual(["ham sandwich", "orange"])
    expect(read("breakfast: oatmeal\nsnack: 2 cookies").map((f) => [f[1], f[2]])).toEqual([
      ["oatmeal", null],
      ["cookies", 2]
    ])
    expect(read("almonds for a snack").map((f) => f[1])).toEqual(["almonds"])
    expect(read("Had a banana and a yogurt on the way to work").map((f) => f[1])).toEqual(["banana", "yogurt"])
    expect(read("a muffin at work at 10am").map((f) => f[1])).toEqual(["muffin"])
  })

  it("reads 'X on Y' as two foods, but a sandwich's bread and a dish's fillings joined by 'and' stay the dish", () => {
    expect(read("2 tbsp peanut butter on a slice of toast").map((f) => [f[1], f[2], f[3]])).toEqual([
      ["peanut butter", 2, "tbsp"],
      ["toast", 1, "slice"]
    ])
    expect(read("a turkey and swiss sandwich on wheat").map((f) => f[1])).toEqual(["turkey and swiss sandwich"])
    expect(read("ham and cheese sandwich, chips").map((f) => f[1])).toEqual(["ham and cheese sandwich", "chips"])
    expect(read("bacon egg and cheese bagel").map((f) => f[1])).toEqual(["bacon egg and cheese bagel"])
    expect(read("toast and a muffin").map((f) => f[1])).toEqual(["toast", "muffin"])
    expect(read("coffee with half and half").map((f) => [f[1], f[2], f[3]])).toEqual([
      ["coffee", null, null],
      ["half and half", 1, "splash"]
    ])
    // Milk with a coffee or tea is a splash in it; a glass of it beside them is not.
    expect(read("tea with milk and sugar").map((f) => [f[1], f[3]])).toEqual([
      ["tea", null],
      ["milk", "splash"],
      ["sugar", null]
    ])
    expect(read("coffee and a glass of milk").map((f) => [f[1], f[3]])).toEqual([
      ["coffee", null],
      ["milk", "glass"]
    ])
    expect(read("6 inch turkey sub").map((f) => [f[1], f[2]])).toEqual([["turkey sub", 1]])
  })

  it("reads numbers in digits, decimals, fractions and words", () => {
    expect(one("2 eggs").amount).toBe(2)
    expect(one("1.5 cups milk").amount).toBe(1.5)
    expect(one("1,5 l water").amount).toBe(1.5)
    expect(one("1,000 g flour").amount).toBe(1000)
    expect(one("1/2 avocado").amount).toBe(0.5)
    expect(one("1 1/2 cups rice").amount).toBe(1.5)
    expect(one("1-1/2 cups rice").amount).toBe(1.5)
    expect(one("½ cup oats").amount).toBe(0.5)
    expect(one("1½ bananas").amount).toBe(1.5)
    expect(one("1 ½ bananas").amount).toBe(1.5)
    expect(one("¾ cup granola").amount).toBeCloseTo(0.75)
    expect(one("⅓ cup rice").amount).toBeCloseTo(1 / 3)
    expect(one("an apple").amount).toBe(1)
    expect(one("a banana").amount).toBe(1)
    expect(one("one banana").amount).toBe(1)
    expect(one("twelve almonds").amount).toBe(12)
    expect(one("seven grapes").amount).toBe(7)
    expect(one("half an avocado").amount).toBe(0.5)
    expect(one("half a cup of oatmeal")).toMatchObject({ amount: 0.5, unit: "cup", query: "oatmeal" })
    expect(one("a half cup of rice")).toMatchObject({ amount: 0.5, unit: "cup" })
    expect(one("one and a half cups of rice")).toMatchObject({ amount: 1.5, unit: "cup" })
    expect(one("a cup and a half of milk")).toMatchObject({ amount: 1.5, unit: "cup", query: "milk" })
    expect(one("a couple of eggs")).toMatchObject({ amount: 2, query: "eggs" })
    expect(one("a few strawberries")).toMatchObject({ amount: 3, query: "strawberries" })
    expect(one("a dozen oysters").amount).toBe(12)
    expect(one("half a dozen eggs").amount).toBe(6)
    expect(one("2-3 crackers").amount).toBe(2.5)
    expect(one("2 to 3 crackers").amount).toBe(2.5)
    expect(one("eggs x2")).toMatchObject({ amount: 2, query: "eggs" })
    expect(one("2x eggs")).toMatchObject({ amount: 2, query: "eggs" })
  })

  it("reads units with their spellings, plurals, capitals and periods, glued or not", () => {
    const unit = (text: string) => one(text).unit
    for (const t of ["150g rice", "150 g rice", "150 grams rice", "150 gr. rice", "150 Grams of rice"]) expect(unit(t), t).toBe("g")
    expect(one("0.2 kg rice")).toMatchObject({ amount: 0.2, unit: "kg" })
    for (const t of ["3 oz chicken", "3 ounces of chicken", "3 OZ chicken", "3 oz. chicken"]) expect(unit(t), t).toBe("oz")
    for (const t of ["1 lb beef", "2 lbs beef", "1 pound of beef"]) expect(unit(t), t).toBe("lb")
    for (const t of ["250 ml milk", "250ml milk", "250 mL milk"]) expect(unit(t), t).toBe("ml")
    for (const t of ["1 l water", "1 liter of water", "1 litre water", "1L water"]) expect(unit(t), t).toBe("l")
    for (const t of ["8 fl oz juice", "8 fl. oz. juice", "8 fluid ounces of juice"]) expect(unit(t), t).toBe("fl oz")
    for (const t of ["1 cup rice", "2 cups of rice", "1 Cup rice", "1 c. rice"]) expect(unit(t), t).toBe("cup")
    for (const t of ["1 tbsp olive oil", "1 Tbsp olive oil", "1 Tbsp. olive oil", "1 tablespoon olive oil", "2 tablespoons of olive oil", "1 T olive oil", "1 tbs oil"])
      expect(unit(t), t).toBe("tbsp")
    for (const t of ["1 tsp sugar", "2 teaspoons sugar", "1 t sugar", "1 tsp. sugar"]) expect(unit(t), t).toBe("tsp")
    expect(one("rice 150g")).toMatchObject({ amount: 150, unit: "g", query: "rice" })
    expect(one("chicken breast (150 g)")).toMatchObject({ amount: 150, unit: "g", query: "chicken breast" })
    expect(one("coffee: 2 cups")).toMatchObject({ amount: 2, unit: "cup", query: "coffee" })
  })

  it("reads household words, sizes and containers as units of the food", () => {
    expect(one("2 large eggs")).toMatchObject({ amount: 2, unit: "large", kind: "household", query: "eggs" })
    expect(one("a medium apple")).toMatchObject({ unit: "medium", query: "apple" })
    expect(one("two slices of pizza")).toMatchObject({ amount: 2, unit: "slice", query: "pizza" })
    expect(one("2 slices pizza")).toMatchObject({ amount: 2, unit: "slice", query: "pizza" })
    expect(one("3 strips of bacon")).toMatchObject({ amount: 3, unit: "strip", query: "bacon" })
    expect(one("2 links sausage")).toMatchObject({ unit: "link", query: "sausage" })
    expect(one("a sleeve of crackers")).toMatchObject({ unit: "sleeve", query: "crackers" })
    expect(one("2 cookies")).toMatchObject({ amount: 2, unit: null, query: "cookies" })
    expect(one("a chocolate bar")).toMatchObject({ amount: 1, unit: null, query: "chocolate bar" })
    for (const [text, unit] of [
      ["a glass of milk", "glass"],
      ["a mug of tea", "mug"],
      ["a can of coke", "can"],
      ["a bottle of water", "bottle"],
      ["a bowl of cereal", "bowl"],
      ["a large glass of milk", "glass"]
    ] as const)
      expect(one(text), text).toMatchObject({ amount: 1, unit, kind: "container" })
    expect(one("cup of coffee")).toMatchObject({ amount: 1, unit: "cup" })
  })

  it("stops after the most foods it will read, and reads a long text in linear time", () => {
    expect(readMeal(Array.from({ length: 30 }, () => "egg").join(", "), 20).length).toBe(21)
    const started = performance.now()
    for (const text of ["1/2 ".repeat(500), "a ".repeat(1000), "and ".repeat(500), "1 1 1 1 ".repeat(250), "(".repeat(2000), "½".repeat(2000), "x".repeat(2000)])
      readMeal(text.slice(0, 2000), 20)
    expect(performance.now() - started).toBeLessThan(200)
  })
})
