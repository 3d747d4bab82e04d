// A meal in words, without a photo: one food per line with its amount, counted by POST /v1/nutrition (free, no key)
// and shown as a result that can be corrected like an analysis.
import { ask, showWords } from "/correct.js"

const $ = (id) => document.getElementById(id)

const MAX_LINES = 20

/** Household measures the friendly form "2 large eggs" understands, as the food records name them. */
const UNITS = new Map(
  Object.entries({
    cup: "cup", cups: "cup", tbsp: "tbsp", tablespoon: "tbsp", tablespoons: "tbsp", tsp: "tsp", teaspoon: "tsp", teaspoons: "tsp",
    slice: "slice", slices: "slice", piece: "piece", pieces: "piece", large: "large", medium: "medium", small: "small",
    oz: "oz", ounce: "oz", ounces: "oz", serving: "serving", servings: "serving"
  })
)

const NUMBER = String.raw`(\d+(?:\.\d+)?|\d+\/\d+|an?|one)`
const GRAMS = String.raw`(\d+(?:\.\d+)?)\s*(?:g|grams?)`

/** "2", "1.5", "1/2", "a", "an", "one" as a number. */
function numberOf(text) {
  if (/^(an?|one)$/i.test(text)) return 1
  const [num, den] = text.split("/")
  return den === undefined ? Number(num) : Number(num) / Number(den)
}

const HOW = "write the amount as grams (“150 g rice”), a measure (“2 large eggs”, “1 cup milk”) or food = amount (“egg = 2 large”)"

/**
 * One line of the meal: `food = amount` as the command line takes it (grams, "150 g", or a number and a unit of
 * the food's measures: "2 large"), "150 g food" or "food 150 g", or "2 large eggs" / "a cup of milk" with a
 * measure of UNITS. Gives { food, grams } or { food, portion: { amount, unit } }, or { error }.
 */
function parseLine(line) {
  const text = line.trim()
  const at = text.lastIndexOf("=")
  if (at >= 0) {
    const food = text.slice(0, at).trim()
    const amount = text.slice(at + 1).trim()
    if (food === "") return { error: "name the food before “=”" }
    const grams = /^(\d+(?:\.\d+)?)\s*(?:g|grams?)?$/i.exec(amount)
    if (grams) return checked(food, { grams: Number(grams[1]) })
    const portion = new RegExp(String.raw`^${NUMBER}\s+(.+)$`, "i").exec(amount)
    if (portion) return checked(food, { portion: { amount: numberOf(portion[1]), unit: portion[2].trim() } })
    return { error: `after “=”, ${HOW}` }
  }
  const first = new RegExp(String.raw`^${GRAMS}\s+(?:of\s+)?(.+)$`, "i").exec(text)
  if (first) return checked(first[2], { grams: Number(first[1]) })
  const last = new RegExp(String.raw`^(.+?)[\s,:]+${GRAMS}$`, "i").exec(text)
  if (last) return checked(last[1], { grams: Number(last[2]) })
  const measure = new RegExp(String.raw`^${NUMBER}\s+([a-z]+)\.?\s+(?:of\s+)?(.+)$`, "i").exec(text)
  const unit = measure && UNITS.get(measure[2].toLowerCase())
  if (measure && unit) return checked(measure[3], { portion: { amount: numberOf(measure[1]), unit } })
  return { error: HOW }
}

/** The amount within what the service takes, and a food text it can look up. */
function checked(food, amount) {
  const name = food.trim()
  if (name === "") return { error: "name the food" }
  if (name.length > 200) return { error: "a food of at most 200 characters" }
  if (amount.grams !== undefined) {
    const g = amount.grams
    if (!(g >= 0.01 && g <= 5000) || Math.abs(g * 100 - Math.round(g * 100)) > 1e-6) return { error: "grams from 0.01 to 5000, at most two decimals" }
  } else if (!(amount.portion.amount > 0) || !Number.isFinite(amount.portion.amount)) return { error: "an amount above 0" }
  return { food: name, ...amount }
}

/** The meal's lines (empty ones skipped), each with its line number and text, or the errors of those that cannot be read. */
function parseMeal(text) {
  const lines = []
  const errors = []
  text.split("\n").forEach((raw, i) => {
    if (raw.trim() === "") return
    const read = parseLine(raw)
    if (read.error) errors.push(`Line ${i + 1} (${raw.trim()}): ${read.error}.`)
    else lines.push({ ...read, n: i + 1, text: raw.trim() })
  })
  if (lines.length + errors.length > MAX_LINES) errors.unshift(`At most ${MAX_LINES} foods at a time.`)
  if (lines.length + errors.length === 0) errors.push("Write the meal first: one food per line with its amount.")
  return { lines, errors }
}

function say(texts) {
  const box = $("words-message")
  box.replaceChildren(...texts.map((text) => Object.assign(document.createElement("p"), { textContent: text })))
  box.hidden = texts.length === 0
}

async function count(event) {
  event.preventDefault()
  const { lines, errors } = parseMeal($("words").value)
  if (errors.length > 0) { say(errors); return }
  const items = lines.map((line) => ({ query: line.food, name: line.food, ...(line.portion ? { portion: line.portion } : { grams: line.grams }) }))
  const submit = $("count")
  submit.disabled = true
  say(["Looking up the foods…"])
  const reply = await ask((client) => client.nutrition(items))
  submit.disabled = false
  if (reply.ok) {
    say([])
    showWords(reply.body, lines)
    return
  }
  // A refusal names its item (`items.2.portion.unit`): the person reads the line it came from.
  const index = reply.error?.body?.error?.issues?.[0]?.path?.[1]
  const line = typeof index === "number" ? lines[index] : undefined
  say([line ? `Line ${line.n} (${line.text}): ${reply.text}.` : `The meal could not be counted: ${reply.text}.`])
}

$("words-form").addEventListener("submit", count)
