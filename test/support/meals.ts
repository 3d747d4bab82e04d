/** Model answers shaped as the documented vision model answer, for scripted fake-model replies. */

export const modelItem = (name: string, query: string, grams: number, per100: readonly [number, number, number, number], confidence = 0.8) => ({
  name,
  query,
  estimated_grams: grams,
  confidence,
  per_100g: { kcal: per100[0], protein_g: per100[1], carbs_g: per100[2], fat_g: per100[3] }
})

export const chickenRice = {
  food_detected: true,
  dish_name: "Grilled chicken with rice",
  items: [
    modelItem("Grilled chicken breast", "chicken breast, grilled", 150, [165, 31, 0, 3.6], 0.85),
    modelItem("White rice", "rice, white, long-grain, cooked", 180, [130, 2.7, 28, 0.3], 0.8),
    modelItem("Olive oil", "oil, olive", 10, [884, 0, 0, 100], 0.5)
  ]
}

export const noFood = { food_detected: false, dish_name: "", items: [] }
