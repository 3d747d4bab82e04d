// The corrected meal as the model gets it from the card: the whole meal for its context (ui/update-model-context)
// and a short message in the chat (ui/message) that says what changed and the new totals.
const figure = (n, digits = 1) => Number(n).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
const quoted = (text) => `“${text}”`

/**
 * The meal on the card (`meal`: its items as corrected, each with `from`, what the analysis said; its totals and
 * grams) as one object: each item with its figures, whether it was corrected and, if so, what it was (`analysed`).
 */
export function correctedMeal(analysis, meal) {
  return {
    request_id: analysis.request_id,
    dish_name: analysis.dish_name,
    items: meal.items.map((item) => {
      const corrected = item.fdc_id !== item.from.fdc_id || item.grams !== item.from.grams
      return {
        name: item.name,
        fdc_id: item.fdc_id,
        matched_name: item.matched_name,
        nutrition_source: item.source,
        grams: item.grams,
        nutrition: item.nutrition,
        corrected,
        ...(corrected ? { analysed: item.from } : {})
      }
    }),
    totals: meal.totals,
    total_grams: meal.total_grams
  }
}

const totalsLine = (meal) =>
  `${figure(meal.totals.kcal, 0)} kcal (protein ${figure(meal.totals.protein_g)} g, carbohydrate ${figure(meal.totals.carbs_g)} g, fat ${figure(meal.totals.fat_g)} g) in ${meal.total_grams} g`

/** One component for the model: its food, grams and figures, and what was corrected. */
function itemLine(item) {
  const n = item.nutrition
  const was = item.analysed
  const changes =
    was === undefined
      ? []
      : [was.fdc_id !== item.fdc_id ? `food swapped from ${quoted(was.name)}` : "", was.grams !== item.grams ? `grams changed from ${was.grams} g` : ""]
  const said = changes.filter(Boolean)
  const food = item.matched_name && item.matched_name !== item.name ? ` (${item.matched_name})` : ""
  const corrected = said.length > 0 ? ` — corrected: ${said.join(", ")}` : ""
  return `- ${item.name}${food}: ${item.grams} g, ${figure(n.kcal, 0)} kcal, protein ${figure(n.protein_g)} g, carbohydrate ${figure(n.carbs_g)} g, fat ${figure(n.fat_g)} g${corrected}`
}

/** What changed in a corrected component, in a few words: "White rice → Tofu, fried", "Grilled chicken breast 150 g → 200 g". */
const changeOf = (item) =>
  (item.analysed.fdc_id !== item.fdc_id ? `${item.analysed.name} → ${item.name}` : item.name) +
  (item.analysed.grams !== item.grams ? ` ${item.analysed.grams} g → ${item.grams} g` : "")

/** ui/update-model-context: the corrected meal in words and as structured content; it replaces the analysis the model had. */
export function contextOf(corrected) {
  const text = [
    `The user corrected the analysis of ${quoted(corrected.dish_name)} (request_id ${corrected.request_id}) on the morsel card; these figures replace the analysis's.`,
    ...corrected.items.map(itemLine),
    `Corrected total: ${totalsLine(corrected)}. Estimates, not medical advice.`
  ].join("\n")
  return { content: [{ type: "text", text }], structuredContent: { corrected_meal: corrected } }
}

/** ui/message: the user's words in the chat, so the model answers with the corrected meal (the details are in its context). */
export function messageOf(corrected) {
  const changes = corrected.items.filter((item) => item.corrected).map(changeOf)
  const text = `I corrected the meal on the card: ${changes.join("; ")}. ${corrected.dish_name} now comes to ${totalsLine(corrected)}. Please use these figures.`
  return { role: "user", content: [{ type: "text", text }] }
}
