// A meal in words, without a photo: the person's own sentence, read by POST /v1/nutrition (free, no key) and shown as
// a result that can be corrected like an analysis, each food with the words it was read from.
import { ask, rereadEditing, showWords } from "/correct.js"

const $ = (id) => document.getElementById(id)

// What the service reads (CONTRACT "A meal in words"): checked here only so that nothing is sent that it would refuse.
const MAX_CHARACTERS = 2000

function say(texts) {
  const box = $("words-message")
  box.replaceChildren(...texts.map((text) => Object.assign(document.createElement("p"), { textContent: text })))
  box.hidden = texts.length === 0
}

async function count(event) {
  event.preventDefault()
  const text = $("words").value
  if (text.trim() === "") { say(["Write the meal first, as you would say it: “2 eggs, a slice of toast with butter and a latte”."]); return }
  if ([...text].length > MAX_CHARACTERS) { say([`At most ${MAX_CHARACTERS.toLocaleString("en-US")} characters at a time: count the meal in parts.`]); return }
  const submit = $("count")
  submit.disabled = true
  say(["Reading the meal…"])
  const reply = await ask((client) => client.nutrition({ text }))
  submit.disabled = false
  if (reply.ok) {
    say([])
    showWords(reply.body)
    return
  }
  say([`The meal could not be counted: ${reply.text}.`])
}

$("words-form").addEventListener("submit", count)

/** One food's words fixed in the editor, read again in its place. */
async function fix(event) {
  event.preventDefault()
  const field = $("edit-words")
  const text = field.value.trim()
  const status = $("edit-status")
  if (text === "" || [...text].length > MAX_CHARACTERS) {
    field.setAttribute("aria-invalid", "true")
    status.textContent = "Write the food and its amount, as you would say it: “2 large eggs”."
    return
  }
  field.removeAttribute("aria-invalid")
  status.textContent = `Reading “${text}”…`
  const done = await rereadEditing(text)
  status.textContent = done ? `Read again: “${text}”.` : ""
}

$("words-fix").addEventListener("submit", fix)
