// What the page's result shows beyond its table: the words each food was read from, the foods not counted beside the
// total with the foods suggested for them, and the nine more nutrients of the items, in totals and per item.
const $ = (id) => document.getElementById(id)

const quoted = (text) => `“${text}”`
const grams = (g) => `${Math.round(g * 100) / 100} g`

/** What was read from a food's words and how its grams were found: "2 large eggs → 100 g, from 2 × large". */
export function readOf(item) {
  if (!item.text) return ""
  if (item.grams === null || item.grams === undefined) return quoted(item.text)
  const read = `${item.text} → ${grams(item.grams)}`
  if (item.grams_basis === "stated") return read
  if (item.grams_basis === "portion") return item.portion ? `${read}, from ${item.portion.amount} × ${item.portion.unit}` : read
  if (item.grams_basis === "typical") return `${read}, a typical serving — change it if you had more`
  return `${read}, as you set it`
}

function button(label, onClick) {
  const b = document.createElement("button")
  b.type = "button"
  b.textContent = label
  b.addEventListener("click", onClick)
  return b
}

/** The foods of `items` not counted, beside the total: each by its words, with the suggested foods to choose (`choose(index, suggestion)`). */
export function showMissing(items, choose) {
  const box = $("incomplete")
  const missing = items.map((item, index) => ({ item, index })).filter(({ item }) => !item.nutrition)
  box.hidden = missing.length === 0
  if (missing.length === 0) return box.replaceChildren()
  const head = document.createElement("p")
  head.textContent = `The totals are incomplete: ${missing.length === 1 ? "1 food was" : `${missing.length} foods were`} not read and ${missing.length === 1 ? "is" : "are"} not counted.`
  const list = document.createElement("ul")
  list.className = "missing"
  for (const { item, index } of missing) {
    const li = document.createElement("li")
    const name = document.createElement("strong")
    name.textContent = quoted(item.text ?? item.name)
    li.append(name)
    const suggestions = item.suggestions ?? []
    if (suggestions.length === 0) li.append(" — no food suggested: fix its words or search with Correct.")
    else {
      li.append(" — did you mean:")
      const choices = document.createElement("ul")
      choices.className = "choices"
      for (const s of suggestions) {
        const choice = document.createElement("li")
        choice.append(button(s.name, () => choose(index, s)))
        choices.append(choice)
      }
      li.append(choices)
    }
    list.append(li)
  }
  box.replaceChildren(head, list)
}

/** The nine more nutrients (CONTRACT "Foods and nutrition"), with their units and the digits shown. */
const MORE = [
  ["fiber_g", "Fiber", "g", 1],
  ["sugars_g", "Sugars", "g", 1],
  ["saturated_fat_g", "Saturated fat", "g", 1],
  ["sodium_mg", "Sodium", "mg", 0],
  ["cholesterol_mg", "Cholesterol", "mg", 0],
  ["potassium_mg", "Potassium", "mg", 0],
  ["calcium_mg", "Calcium", "mg", 0],
  ["iron_mg", "Iron", "mg", 1],
  ["vitamin_c_mg", "Vitamin C", "mg", 1]
]

const figure = (value, unit, digits) => `${Number(value).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })} ${unit}`

/** Takes the more nutrients off the page. */
export function clearMore() {
  $("more").hidden = true
  $("more-totals").replaceChildren()
  $("more-items").replaceChildren()
}

/**
 * The nine more nutrients of the counted items that have them: their totals (marked "at least" where an item lacks a
 * figure) and each item's own, in a block that folds away.
 */
export function showMore(items) {
  const known = items.filter((item) => item.nutrition && "fiber_g" in item.nutrition)
  const counted = items.filter((item) => item.nutrition)
  if (known.length === 0) return clearMore()
  $("more").hidden = false
  $("more-note").textContent =
    known.length === counted.length
      ? "Totals of the foods counted, from their USDA records."
      : `Totals of the ${known.length} of ${counted.length} foods whose USDA record is known; the others are not in them.`
  const totals = MORE.map(([key, label, unit, digits]) => {
    const values = known.map((item) => item.nutrition[key])
    // Added as the service adds its totals: to two decimals.
    const sum = Math.round(values.reduce((s, v) => s + (v ?? 0), 0) * 100) / 100
    const dt = Object.assign(document.createElement("dt"), { textContent: label })
    const lacking = values.some((v) => v === null || v === undefined)
    const dd = Object.assign(document.createElement("dd"), { textContent: `${lacking ? "at least " : ""}${figure(sum, unit, digits)}` })
    const pair = document.createElement("div")
    pair.append(dt, dd)
    return pair
  })
  $("more-totals").replaceChildren(...totals)
  $("more-items").replaceChildren(
    ...known.map((item) => {
      const li = document.createElement("li")
      const name = document.createElement("strong")
      name.textContent = `${item.name}, ${grams(item.grams)}`
      const figures = MORE.map(([key, label, unit, digits]) => {
        const v = item.nutrition[key]
        return `${label} ${v === null || v === undefined ? "not known" : figure(v, unit, digits)}`
      })
      li.append(name, ": ", figures.join(" · "))
      return li
    })
  )
}
