// A meal on the page that the person corrects: each item's grams typed, its food replaced from a search or its words
// read again, counted through POST /v1/nutrition (free, no key), marked "corrected", undone item by item or all at once.
import { createClient, MorselError } from "/client/morsel-client.js"
import { clearMore, readOf, showMissing, showMore } from "/more.js"
import { clear as clearTable, show } from "/result.js"

const $ = (id) => document.getElementById(id)
// Food lookups are free: they go without the credit key (a key, if sent, would have to be valid).
const client = createClient({ baseUrl: location.origin })

// `meal`: { title, request_id, base: the answer's own totals, entries: [{ now, original, asked }] }; `editing`: an index or -1.
const state = { meal: null, editing: -1, timer: 0, asking: 0 }

const quoted = (text) => `“${text}”`
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`

/** What went wrong with a food call, in the page's words. */
function reasonOf(error) {
  if (!(error instanceof MorselError) || !error.status) return "the service cannot be reached; check your connection and try again"
  if (error.status === 429) return `too many food lookups from here just now; try again ${error.retryAfter ? `in ${error.retryAfter} seconds` : "in a moment"}`
  // A refusal names the field (`items.0.portion.unit: …`); the page says which item itself.
  const message = error.body?.error?.message
  if (error.status === 400 && message) return message.replace(/^(?:items\.\d+\.[\w.]+|text): /, "")
  if (error.status === 404) return "that food is no longer in this server's database; search again"
  return `the service answered ${error.status}; try again`
}

/** One food call; resolves to { ok: true, body } or { ok: false, error, text } and never throws. */
export async function ask(use) {
  try {
    return { ok: true, body: await use(client) }
  } catch (error) {
    return { ok: false, error, text: reasonOf(error) }
  }
}

// The arithmetic of a result (the service's src/foods/core/arithmetic.ts): nutrients in tenths, grams in hundredths.
const tenth = (v) => Math.round(v * 10) / 10
const MACROS = ["kcal", "protein_g", "carbs_g", "fat_g"]

/** A component the model estimated itself keeps its own figures per 100 g: scaled to the new grams as the analysis scales them. */
const scaled = (per100g, grams) => Object.fromEntries(MACROS.map((key) => [key, tenth((per100g[key] * grams) / 100)]))

/** Hundredths, half up on the decimal figure, as the food paths round their totals. */
const hundredth = (v) => Math.round(Number((v * 100).toPrecision(12))) / 100

/** The items' figures added up in their order, as the food paths add up a corrected meal's totals. */
function sumOf(items) {
  const totals = Object.fromEntries(MACROS.map((key) => [key, hundredth(items.reduce((sum, item) => sum + item.nutrition[key], 0))]))
  return { totals, total_grams: Math.round(items.reduce((sum, item) => sum + item.grams, 0) * 100) / 100 }
}

const amountOf = (portion) => (portion ? `${portion.amount} ${portion.unit}` : "")

/** An item of POST /v1/nutrition's answer as an entry's state; a food read from words is named by its words. */
const counted = (item) => ({
  name: item.text === undefined ? item.name : item.query,
  query: item.query,
  text: item.text ?? null,
  grams_basis: item.grams_basis ?? null,
  grams: item.grams,
  portion: item.portion ? { amount: item.portion.amount, unit: item.portion.unit } : null,
  amount: amountOf(item.portion),
  fdc_id: item.fdc_id,
  matched_name: item.matched_name,
  per_100g: item.per_100g,
  nutrition: item.nutrition,
  nutrition_source: "usda",
  suggestions: []
})

/** An item is corrected while its food, grams or measure differ from the answer's. */
const isCorrected = ({ now, original }) =>
  now.fdc_id !== original.fdc_id || now.grams !== original.grams || amountOf(now.portion) !== amountOf(original.portion) || now.text !== original.text

const entryOf = (now) => ({ now, original: now, asked: 0 })

/** An analysis result (SPEC §2.2), shown and ready to be corrected. */
export function showAnalysis(result) {
  const entries = result.items.map((item) =>
    entryOf({ ...item, grams: item.estimated_grams, portion: null, amount: "", suggestions: [] })
  )
  const meal = { title: result.dish_name, request_id: result.request_id, base: { totals: result.totals, total_grams: result.estimated_total_grams }, entries }
  open(meal)
  addMore(meal)
}

/**
 * The nine more nutrients of an analysis's USDA items, from the free path: each item's record and grams counted again.
 * They join the item's figures (the analysis's own four stay); a failure only leaves them out.
 */
async function addMore(meal) {
  const matched = meal.entries.filter((entry) => entry.now.fdc_id && entry.now.nutrition_source === "usda")
  if (matched.length === 0) return
  const items = matched.map(({ now }) => ({ fdc_id: now.fdc_id, grams: Math.min(5000, Math.max(0.01, Math.round(now.grams * 100) / 100)) }))
  const reply = await ask((c) => c.nutrition(items))
  if (state.meal !== meal || !reply.ok) return
  matched.forEach((entry, k) => {
    const full = { ...entry.original, nutrition: { ...reply.body.items[k].nutrition, ...entry.original.nutrition } }
    if (entry.now === entry.original) entry.now = full
    entry.original = full
  })
  render()
}

/** The foods of an answer to a meal in words, in the order they were written: those read and those nothing matched. */
function foodsOf(answer) {
  const matched = [...answer.items]
  return Array.from({ length: answer.items.length + answer.unmatched.length }, (_, index) => {
    const miss = answer.unmatched.find((u) => u.index === index)
    if (!miss) return counted(matched.shift())
    return { name: miss.query, query: miss.query, text: miss.text ?? miss.query, grams_basis: null, grams: null, portion: null, amount: "", fdc_id: null, nutrition: null, suggestions: miss.suggestions }
  })
}

/** POST /v1/nutrition's answer to a meal in words: each food with the words it was read from; one nothing matched keeps its suggestions. */
export function showWords(answer) {
  open({ title: "Your meal, in words", request_id: null, base: { totals: answer.totals, total_grams: answer.total_grams }, entries: foodsOf(answer).map(entryOf) })
}

/**
 * One food's words read again (`text` as the person fixed them): the answer's foods take its place, every other food
 * and its corrections stay. True once it shows.
 */
async function reread(index, text) {
  const { meal } = state
  const entry = meal.entries[index]
  const asked = ++entry.asked
  say("")
  busy(+1)
  const reply = await ask((c) => c.nutrition({ text }))
  busy(-1)
  const at = meal.entries.indexOf(entry)
  if (state.meal !== meal || at < 0 || asked !== entry.asked) return false
  if (!reply.ok) {
    say(`${quoted(text)} could not be read: ${reply.text}. The figures shown are without this change.`, { retry: () => reread(at, text) })
    return false
  }
  const [first, ...more] = foodsOf(reply.body)
  entry.now = first
  // Words that now name more foods than one: each joins the meal after it, and the totals are added up from the items.
  if (more.length > 0) {
    meal.entries.splice(at + 1, 0, ...more.map(entryOf))
    meal.base = null
  }
  settle()
  return true
}

function open(meal) {
  state.meal = null
  closeEditor()
  state.meal = meal
  say("")
  render(true)
}

/** Takes the meal off the page (a new photo, a new analysis, an error). */
export function clear() {
  state.meal = null
  closeEditor()
  for (const id of ["incomplete", "corrected-note", "correct-message", "undo-all"]) $(id).hidden = true
  clearMore()
  clearTable()
}

/** The "Correct" button of an item: opens the editor below the table for it. */
function editButton(item, index) {
  const b = button("Correct", () => openEditor(index), "secondary")
  b.setAttribute("aria-label", `Correct ${item.name}`)
  b.setAttribute("aria-controls", "editor")
  b.setAttribute("aria-expanded", String(index === state.editing))
  return b
}

function button(label, onClick, className = "") {
  const b = document.createElement("button")
  b.type = "button"
  b.textContent = label
  if (className) b.className = className
  b.addEventListener("click", onClick)
  return b
}

/** For an item nothing matched: why it is not counted, and where to fix it. */
const missNote = (entry) =>
  entry.now.text
    ? "Not read, so not counted in the totals: fix its words with Correct, or choose a food beside the total."
    : "Not found, so not counted in the totals: search for it with Correct."

/**
 * A suggested food chosen for an item nothing matched: at the item's grams, or, when its words gave none, at the
 * food's first household portion, as the service reads a food written without an amount.
 */
async function choose(index, suggestion) {
  const chosen = { fdc_id: suggestion.fdc_id, name: suggestion.name }
  if (state.meal.entries[index].now.grams !== null) return change(index, chosen)
  const food = await ask((c) => c.food(suggestion.fdc_id))
  const row = food.ok ? food.body.portions[0] : undefined
  return change(index, row ? { ...chosen, portion: { amount: row.amount, unit: row.unit }, grams_basis: "typical" } : { ...chosen, grams: 100 })
}

/** The words of the item in the editor, fixed by the person, read again in its place. */
export const rereadEditing = (text) => (state.editing >= 0 ? reread(state.editing, text) : Promise.resolve(false))

/** The meal as it stands: the answer's own totals until something is corrected, then the items added up again. */
function render(scroll = false) {
  const { meal } = state
  const items = meal.entries.map((entry) => ({
    ...entry.now,
    read: readOf(entry.now),
    corrected: isCorrected(entry),
    note: entry.now.nutrition ? undefined : missNote(entry)
  }))
  const corrected = items.filter((item) => item.corrected)
  const { totals, total_grams } = corrected.length > 0 || meal.base === null ? sumOf(items.filter((item) => item.nutrition)) : meal.base
  show({ title: meal.title, items, totals, total_grams, request_id: meal.request_id }, { controls: editButton, incomplete: items.some((item) => !item.nutrition), scroll })
  showMissing(items, choose)
  showMore(items)
  $("corrected-note").hidden = corrected.length === 0
  const own = corrected.some((item) => item.nutrition_source === "ai") ? "; a component the model estimated keeps its own figures per 100 g" : ""
  $("corrected-note").textContent = `${plural(corrected.length, "item", "items")} corrected by you: counted from the USDA record and the grams you chose${own}.`
  $("undo-all").hidden = corrected.length === 0
}

/** The result is marked busy while a change is being counted. */
function busy(step) {
  state.asking += step
  if (state.asking > 0) $("result").setAttribute("aria-busy", "true")
  else $("result").removeAttribute("aria-busy")
}

function say(text, { retry } = {}) {
  const box = $("correct-message")
  box.replaceChildren()
  box.hidden = !text
  if (!text) return
  const p = document.createElement("p")
  p.textContent = text
  box.append(p)
  if (retry) box.append(button("Try again", retry))
}

/** The request for an entry: its food by id, and the portion it was given as until grams are typed, then its grams. */
const requestOf = (now) => ({ fdc_id: now.fdc_id, name: now.name.slice(0, 200), ...(now.portion ? { portion: now.portion } : { grams: now.grams }) })

/** Applies a change to an item and counts it; the latest change of an item wins over slower answers. True once it shows. */
async function change(index, wanted) {
  const { meal } = state
  const entry = meal.entries[index]
  const next = { ...entry.now, ...wanted }
  const asked = ++entry.asked
  say("")
  // Typed grams are the person's own: no longer what the words gave.
  if (wanted.grams !== undefined) next.grams_basis = null
  if (!next.fdc_id) {
    // Nothing to look up: the model's own figures are scaled; a food not found yet only keeps the grams.
    entry.now = next.nutrition_source === "ai" ? { ...next, nutrition: scaled(next.per_100g, next.grams) } : next
    settle()
    return true
  }
  busy(+1)
  const reply = await ask((c) => c.nutrition([requestOf(next)]))
  busy(-1)
  if (state.meal !== meal || asked !== entry.asked) return false
  if (!reply.ok) {
    say(`${quoted(next.name)} could not be counted: ${reply.text}. The figures shown are without this change.`, { retry: () => change(index, wanted) })
    return false
  }
  entry.now = { ...counted(reply.body.items[0]), name: next.name, text: next.text, grams_basis: next.grams_basis }
  settle()
  return true
}

/** After a change: the table, totals, chart and notes again, and the editor on what is now true of its item. */
function settle() {
  render()
  if (state.editing >= 0) fillEditor(false)
}

function undo(index) {
  const entry = state.meal.entries[index]
  entry.asked++
  entry.now = entry.original
}

// ---- the editor of one item ----

function openEditor(index) {
  state.editing = index
  $("editor").hidden = false
  fillEditor(true)
  render()
  $("editor").scrollIntoView({ behavior: "smooth", block: "nearest" })
  $("edit-grams").focus()
}

/** The editor's fields from the item; `fresh` when it is opened on an item (a search starts from its name). */
function fillEditor(fresh) {
  const entry = state.meal.entries[state.editing]
  const { now } = entry
  $("editor-name").textContent = now.name
  if (fresh || document.activeElement !== $("edit-grams")) $("edit-grams").value = now.grams ?? ""
  $("edit-grams").removeAttribute("aria-invalid")
  $("undo-item").hidden = !isCorrected(entry)
  $("words-fix").hidden = !now.text
  if (fresh || document.activeElement !== $("edit-words")) $("edit-words").value = now.text ?? ""
  if (fresh) {
    $("food-query").value = now.query ?? now.name
    $("found").replaceChildren()
    $("edit-status").textContent = now.amount ? `Given as ${now.amount}; typing grams replaces it.` : ""
  }
}

function closeEditor() {
  clearTimeout(state.timer)
  const was = state.editing
  state.editing = -1
  $("editor").hidden = true
  if (state.meal && was >= 0) {
    render()
    document.querySelectorAll("#rows .edit button")[was]?.focus()
  }
}

/** Grams as the service takes them: 0.01 to 5000, at most two decimals. */
const gramsOf = (text) => (/^\d+(\.\d{1,2})?$/.test(text) && Number(text) >= 0.01 && Number(text) <= 5000 ? Number(text) : null)

/** Typed grams count once the typing pauses. */
function typedGrams() {
  clearTimeout(state.timer)
  const index = state.editing
  const grams = gramsOf($("edit-grams").value.trim())
  if (grams === null) {
    $("edit-grams").setAttribute("aria-invalid", "true")
    $("edit-status").textContent = "Grams: from 0.01 to 5000, at most two decimals."
    return
  }
  $("edit-grams").removeAttribute("aria-invalid")
  $("edit-status").textContent = ""
  state.timer = setTimeout(() => {
    if (state.editing === index && grams !== state.meal.entries[index].now.grams) change(index, { grams, portion: null, amount: "" })
  }, 300)
}

async function searchFoods(event) {
  event.preventDefault()
  const index = state.editing
  const query = $("food-query").value.trim()
  const status = $("edit-status")
  const found = $("found")
  found.replaceChildren()
  if (query === "" || query.length > 200) { status.textContent = "Type the food to look for, up to 200 characters."; return }
  status.textContent = "Searching…"
  const reply = await ask((c) => c.searchFoods(query, { limit: 8 }))
  if (state.editing !== index) return
  if (!reply.ok) { status.textContent = `The search did not answer: ${reply.text}.`; return }
  const { foods } = reply.body
  const name = state.meal.entries[index].now.name
  status.textContent = foods.length === 0 ? `No food found for ${quoted(query)}: try other words.` : `${plural(foods.length, "food", "foods")} for ${quoted(query)}. Choose one to replace ${quoted(name)}; its amount stays.`
  for (const food of foods) {
    const small = document.createElement("small")
    const p = food.per_100g
    small.textContent = `${Math.round(p.kcal)} kcal, ${p.protein_g} g protein, ${p.carbs_g} g carbs, ${p.fat_g} g fat per 100 g`
    const choice = button(food.name, async () => {
      found.replaceChildren()
      status.textContent = `Replacing ${quoted(name)} with ${quoted(food.name)}…`
      const done = await change(index, { fdc_id: food.fdc_id, name: food.name })
      if (state.editing === index) status.textContent = done ? `Replaced with ${quoted(food.name)}.` : ""
    })
    choice.append(small)
    const li = document.createElement("li")
    li.append(choice)
    found.append(li)
  }
}

$("edit-grams").addEventListener("input", typedGrams)
$("food-search").addEventListener("submit", searchFoods)
$("close-editor").addEventListener("click", closeEditor)
$("undo-item").addEventListener("click", () => {
  undo(state.editing)
  say("")
  render()
  fillEditor(true)
})
$("undo-all").addEventListener("click", () => {
  for (const index of state.meal.entries.keys()) undo(index)
  say("")
  render()
  if (state.editing >= 0) fillEditor(true)
})
