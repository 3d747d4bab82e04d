// Corrections on the card: each component's grams can be changed and its food swapped for one found in the food
// database; the figures come from the server's free tools (search_foods, food_nutrition) called through the host, and
// "Use corrected meal" hands the corrected meal to the model. Its markup is card.html's #corrections block; `render`
// is the web page's result view; `correctedMeal`, `contextOf` and `messageOf` (handover.js) come before it.
const SEARCH_LIMIT = 8
const FOUR = ["kcal", "protein_g", "carbs_g", "fat_g"]

/** Grams travel in hundredths and nutrients in tenths, as the server rounds them. */
const roundGrams = (g) => Math.round(g * 100) / 100
const roundNutrient = (v) => Math.round(v * 10) / 10
const four = (nutrition) => Object.fromEntries(FOUR.map((key) => [key, nutrition[key]]))
const quoted = (text) => `“${text}”`

/** An item the model estimated itself (no database record) keeps its figures per 100 g, scaled to its grams as the analysis does. */
const scaled = (per100g, grams) => Object.fromEntries(FOUR.map((key) => [key, roundNutrient((per100g[key] * grams) / 100)]))

/** The refusal's own words of a failed tool call (its structured error, else its first text). */
function refusalOf(result) {
  const error = result?.structuredContent?.error
  if (typeof error?.message === "string") return error.message
  const text = result?.content?.find((block) => block.type === "text")?.text
  return typeof text === "string" && text !== "" ? text : "the server gave no answer"
}

const reasonOf = (error) => (error instanceof Error ? error.message : String(error))

/** A component of the analysis, as the card corrects it: what it is now and what the analysis said (`from`). */
const fromAnalysis = (item) => {
  const grams = roundGrams(item.estimated_grams)
  return {
    name: item.name,
    query: item.query,
    fdc_id: item.fdc_id,
    matched_name: item.matched_name,
    source: item.nutrition_source,
    grams,
    per_100g: four(item.per_100g),
    nutrition: four(item.nutrition),
    from: { name: item.name, fdc_id: item.fdc_id, grams }
  }
}

const isCorrected = (item) => item.fdc_id !== item.from.fdc_id || item.grams !== item.from.grams

/** The corrections of the App: `start` with an analysis result the card shows, `stop` when it leaves the card. */
export function makeCorrections({ app, render }) {
  const byId = (id) => document.getElementById(id)
  const section = byId("result")
  const block = byId("corrections")
  const useButton = byId("use-corrected")
  const panel = byId("swap")
  const queryInput = byId("swap-query")
  const results = byId("swap-results")
  // Below the items and the chart, above the disclaimer.
  section.querySelector(".result-grid")?.after(block)

  let analysis = null
  // The meal as last counted by the server (shown), and as the user wants it (counted next).
  let meal = null
  let wanted = []
  // What the user is typing in a grams field, kept when the figures come back meanwhile.
  const drafts = new Map()
  let latest = 0
  let busy = false
  let handing = false
  let swapping = -1
  let searches = 0

  const say = (text) => {
    byId("correction-status").textContent = text
  }
  const sayInSwap = (text) => {
    byId("swap-status").textContent = text
  }
  const anyCorrected = () => meal?.items.some(isCorrected) === true
  const canHandOver = () => {
    const host = app.getHostCapabilities() ?? {}
    return Boolean(host.updateModelContext || host.message)
  }
  const refresh = () => {
    useButton.disabled = busy || handing || !anyCorrected()
    section.setAttribute("aria-busy", String(busy))
  }

  /** The meal on the card again, without moving it: the page's view scrolls to a new result, a corrected one stays put. */
  function show(focus = document.activeElement?.dataset?.focus) {
    const shown = {
      ...analysis,
      items: meal.items.map((item) => ({
        name: item.name,
        estimated_grams: item.grams,
        nutrition_source: item.source,
        matched_name: item.matched_name,
        nutrition: item.nutrition
      })),
      totals: meal.totals,
      estimated_total_grams: meal.total_grams
    }
    section.scrollIntoView = () => {}
    try {
      render(shown)
    } finally {
      delete section.scrollIntoView
    }
    decorate()
    if (focus) section.querySelector(`[data-focus="${focus}"]`)?.focus()
  }

  /** Each row of the page's view gets its grams field, its swap button and, once corrected, its mark. */
  function decorate() {
    section.querySelectorAll("#rows tr").forEach((tr, index) => {
      const item = meal.items[index]
      if (item === undefined) return
      const input = document.createElement("input")
      Object.assign(input, { type: "number", min: "0.01", max: "5000", step: "0.01", inputMode: "decimal", className: "grams-input" })
      input.value = drafts.get(index) ?? String(item.grams)
      input.dataset.focus = `grams-${index}`
      input.setAttribute("aria-label", `Grams of ${item.name}`)
      input.addEventListener("input", () => drafts.set(index, input.value))
      input.addEventListener("change", () => changeGrams(index, input))
      tr.querySelector('[data-label="Grams"]')?.replaceChildren(input)

      const swap = document.createElement("button")
      Object.assign(swap, { type: "button", className: "secondary swap", textContent: "Swap food" })
      swap.dataset.focus = `swap-${index}`
      swap.setAttribute("aria-label", `Swap the food of ${item.name}`)
      swap.addEventListener("click", () => openSwap(index))
      const source = tr.querySelector(".source")
      if (isCorrected(item)) {
        tr.classList.add("corrected")
        const mark = document.createElement("strong")
        Object.assign(mark, { className: "mark", textContent: "Corrected" })
        source?.append(mark)
      }
      source?.append(swap)
    })
    const total = section.querySelector("#totals th")
    if (total && anyCorrected()) total.textContent = "Corrected total"
    refresh()
  }

  /**
   * The figures of a meal: the database's components counted by food_nutrition, in one call through the host; the
   * model's own estimates scaled. With only database components (the usual case) the totals are the server's.
   */
  async function count(items) {
    const known = items.filter((item) => item.fdc_id !== null)
    let answer = null
    if (known.length > 0) {
      const request = known.map((item) => ({ fdc_id: item.fdc_id, grams: item.grams, ...(item.name ? { name: item.name.slice(0, 200) } : {}) }))
      const result = await app.callServerTool({ name: "food_nutrition", arguments: { items: request } })
      if (result.isError || !Array.isArray(result.structuredContent?.items)) throw new Error(refusalOf(result))
      answer = result.structuredContent
    }
    let next = 0
    const counted = items.map((item) => {
      if (item.fdc_id === null) return { ...item, nutrition: scaled(item.per_100g, item.grams) }
      const found = answer.items[next++]
      return { ...item, source: "usda", matched_name: found.matched_name, per_100g: four(found.per_100g), nutrition: four(found.nutrition) }
    })
    const own = counted.filter((item) => item.fdc_id === null)
    if (own.length === 0) return { items: counted, totals: four(answer.totals), total_grams: answer.total_grams }
    const base = answer === null ? { totals: { kcal: 0, protein_g: 0, carbs_g: 0, fat_g: 0 }, total_grams: 0 } : answer
    const totals = Object.fromEntries(FOUR.map((key) => [key, roundNutrient(own.reduce((sum, item) => sum + item.nutrition[key], base.totals[key]))]))
    return { items: counted, totals, total_grams: roundGrams(own.reduce((sum, item) => sum + item.grams, base.total_grams)) }
  }

  /** Counts the wanted meal; only the latest count is shown, and a failed one leaves the last counted meal on the card. */
  async function recount() {
    const call = ++latest
    busy = true
    refresh()
    say("Counting the corrected meal…")
    try {
      const counted = await count(wanted)
      if (call !== latest) return
      meal = counted
      wanted = counted.items
      say(anyCorrected() ? "Corrected figures from the food database." : "")
    } catch (error) {
      if (call !== latest) return
      wanted = meal.items
      say(`The corrected figures could not be counted: ${reasonOf(error)}. The card shows the last counted meal.`)
    }
    busy = false
    show()
  }

  function changeGrams(index, input) {
    const grams = Number(input.value)
    if (input.value.trim() === "" || !Number.isFinite(grams) || grams < 0.01 || grams > 5000) {
      input.setAttribute("aria-invalid", "true")
      say("Grams go from 0.01 to 5000.")
      return
    }
    drafts.delete(index)
    input.removeAttribute("aria-invalid")
    if (roundGrams(grams) === wanted[index].grams) return
    wanted = wanted.map((item, i) => (i === index ? { ...item, grams: roundGrams(grams) } : item))
    recount()
  }

  function openSwap(index) {
    swapping = index
    byId("swap-label").textContent = `Swap ${quoted(wanted[index].name)} for`
    queryInput.value = wanted[index].query ?? wanted[index].name
    panel.hidden = false
    queryInput.focus()
    search()
  }

  function closeSwap() {
    const index = swapping
    swapping = -1
    searches++
    panel.hidden = true
    results.replaceChildren()
    sayInSwap("")
    if (index >= 0) section.querySelector(`[data-focus="swap-${index}"]`)?.focus()
  }

  /** Foods for the text, best first, from search_foods through the host; only the latest search is listed. */
  async function search() {
    const text = queryInput.value.trim().slice(0, 200)
    results.replaceChildren()
    if (text === "") {
      sayInSwap("Type a food to search for.")
      return
    }
    const call = ++searches
    sayInSwap("Searching…")
    try {
      const result = await app.callServerTool({ name: "search_foods", arguments: { query: text, limit: SEARCH_LIMIT } })
      if (call !== searches) return
      if (result.isError || !Array.isArray(result.structuredContent?.foods)) throw new Error(refusalOf(result))
      const foods = result.structuredContent.foods
      results.replaceChildren(...foods.map(choice))
      sayInSwap(foods.length === 0 ? `No food found for ${quoted(text)}; try other words.` : `Foods for ${quoted(text)}, best first:`)
    } catch (error) {
      if (call === searches) sayInSwap(`The search did not answer: ${reasonOf(error)}.`)
    }
  }

  function choice(food) {
    const button = document.createElement("button")
    button.type = "button"
    button.className = "secondary"
    const about = document.createElement("small")
    about.textContent = [`${Math.round(food.per_100g.kcal)} kcal per 100 g`, food.food_group].filter(Boolean).join(" · ")
    button.append(food.name, about)
    button.addEventListener("click", () => pick(food))
    const li = document.createElement("li")
    li.append(button)
    return li
  }

  /** The swapped component keeps its grams; swapped back to the analysis's own food, it gets its own name back. */
  function pick(food) {
    const index = swapping
    closeSwap()
    wanted = wanted.map((item, i) =>
      i === index
        ? { ...item, fdc_id: food.fdc_id, name: food.fdc_id === item.from.fdc_id ? item.from.name : food.name, matched_name: food.name, source: "usda", per_100g: four(food.per_100g) }
        : item
    )
    recount()
  }

  /** ui/update-model-context with the whole corrected meal (it replaces the analysis there), then a short ui/message so the model answers. */
  async function handOver() {
    const corrected = correctedMeal(analysis, meal)
    const host = app.getHostCapabilities() ?? {}
    handing = true
    refresh()
    say("Handing the corrected meal to the model…")
    try {
      if (host.updateModelContext) await app.updateModelContext(contextOf(corrected))
      if (host.message) {
        const sent = await app.sendMessage(messageOf(corrected))
        if (sent?.isError) throw new Error("the chat did not take the message")
        say("The corrected meal is in the chat.")
      } else {
        say("The model has the corrected meal for your next message.")
      }
    } catch (error) {
      say(`The corrected meal could not be handed over: ${reasonOf(error)}. Try again.`)
    }
    handing = false
    refresh()
  }

  // No <form>: hosts sandbox the card without allow-forms, which blocks every form submission.
  byId("swap-search").addEventListener("click", search)
  queryInput.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return
    event.preventDefault()
    search()
  })
  byId("swap-cancel").addEventListener("click", closeSwap)
  useButton.addEventListener("click", handOver)

  return {
    /** A result on the card (already rendered): corrections offered when the host passes tool calls to the server. */
    start(result) {
      latest++
      busy = false
      drafts.clear()
      closeSwap()
      say("")
      analysis = result
      meal = { items: result.items.map(fromAnalysis), totals: four(result.totals), total_grams: result.estimated_total_grams }
      wanted = meal.items
      block.hidden = !app.getHostCapabilities()?.serverTools
      useButton.hidden = !canHandOver()
      if (!block.hidden) decorate()
    },
    /** The result left the card: nothing of its corrections stays, and a count still under way is dropped. */
    stop() {
      latest++
      busy = false
      analysis = null
      meal = null
      wanted = []
      closeSwap()
      say("")
      block.hidden = true
      section.removeAttribute("aria-busy")
    }
  }
}
