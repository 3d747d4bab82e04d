// The morsel web page: a photo in, the estimate as a table and a chart; credit keys and purchases in the browser.
import { createClient, MorselError } from "/client/morsel-client.js"
import { preparePhoto } from "/photo.js"
import { clear as clearResult, showAnalysis as render } from "/correct.js"

const KEY_STORE = "morsel.key"
const ORDER_STORE = "morsel.order"

const $ = (id) => document.getElementById(id)
// `announced`: the balance a purchase notice states, so the notice goes once the balance has moved.
const state = { health: null, photo: null, pending: null, announced: undefined }

/** Which payment ways this server has on, by its own /health; unknown (unreachable) counts as on. */
const cardsOn = () => state.health?.card_credits_enabled ?? true
const x402On = () => state.health?.x402_enabled ?? false
const operator = () => state.health?.operator ?? {}

/** A sentence ends with a full stop, whatever the text before it. */
const sentence = (text) => (/[.!?…]$/.test(text.trim()) ? text.trim() : `${text.trim()}.`)

/** The operator's support contact as a link (an e-mail address or a URL), or null when none is published. */
function contactLink() {
  const contact = operator().support_contact
  if (!contact) return null
  const a = document.createElement("a")
  a.href = contact.includes("@") && !/^https?:/i.test(contact) ? `mailto:${contact}` : contact
  a.textContent = contact
  a.rel = "noopener"
  return a
}

/** "Contact <name> support at <contact>", as a paragraph, or what to do when the operator published none. */
function contactParagraph(lead) {
  const p = document.createElement("p")
  p.className = "contact"
  const link = contactLink()
  const who = operator().name ? `${operator().name} support` : "support"
  const prefix = lead ? `${lead} ` : ""
  if (link) p.append(`${prefix}Contact ${who} at `, link, ".")
  else p.append(`${prefix}This server's operator has not published a support contact.`)
  return p
}

const randomHex = (bytes) => Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("")
const idempotencyKey = () => `web-${randomHex(16)}`
const uuidV4 = () => crypto.randomUUID()

const keyPrefix = () => (state.health?.test_mode ? "morsel_test_" : "morsel_live_")
const currentKey = () => $("key").value.trim()
// The page talks to its own server through morsel/client (served by it), with the key when one is given.
const clientFor = (key) => createClient({ baseUrl: location.origin, ...(key ? { apiKey: key } : {}) })
/** One call through the client; resolves to { status, body, retryAfter } and never throws on HTTP errors. */
async function call(use, key) {
  try {
    return { status: 200, body: await use(clientFor(key)), retryAfter: null }
  } catch (error) {
    if (error instanceof MorselError && error.status !== undefined) return { status: error.status, body: error.body ?? null, retryAfter: error.retryAfter ?? null }
    return { status: 0, body: null, retryAfter: null }
  }
}

const codeOf = (reply) => reply.body?.error?.code ?? ""
const messageOf = (reply) => reply.body?.error?.message ?? ""

function wait(seconds) {
  if (!seconds) return "in a moment"
  if (seconds >= 120) return `in about ${Math.round(seconds / 60)} minutes`
  return `in ${seconds} seconds`
}

/** What a person should read for an error answer, and whether the identical request may be resent. */
function explain(reply) {
  const code = codeOf(reply)
  const id = reply.body?.error?.request_id ? ` (request ${reply.body.error.request_id})` : ""
  switch (reply.status) {
    case 0: return { text: "The service cannot be reached. Check your connection and try again.", retry: true }
    case 400: return { text: `The service refused this photo or form: ${sentence(messageOf(reply) || code)} Nothing was charged.` }
    case 401: return { text: "This key is not active yet. Buy credits to activate it, or paste the key you bought credits with." }
    case 402:
      if (code === "key_paused") return { text: `This key is paused after a refund or dispute, pending support review${id}. Nothing was charged.`, support: true }
      if (!cardsOn()) return { text: `${noPaymentsText()} Nothing was charged.` }
      if (code === "insufficient_credits") return { text: "No credits left on this key. Buy 500 credits for USD 5.00 to continue.", buy: true }
      return { text: "Analyses are paid. Generate or paste a credit key, then buy credits.", buy: true }
    case 409:
      if (code === "in_progress") return { text: "This photo is still being analysed. Retry in a moment; it will not be charged twice.", retry: true }
      return { text: `${messageOf(reply) || "This request conflicts with an earlier one."} Choose the photo again to start a new analysis.` }
    case 410: return { text: "This result is older than 24 hours and was removed. Choose the photo again for a new analysis." }
    case 413: return { text: "The photo is too large even after shrinking. Try another photo." }
    case 415: return { text: "The page sent an unsupported request. Reload the page and try again." }
    case 422: return { text: `No food was detected in this photo${id}. Nothing was charged. Try a clearer photo of the meal.` }
    case 429:
      if (code === "failure_limit") return { text: `Too many unsuccessful analyses for this key today. Nothing was charged. Try again ${wait(reply.retryAfter)}.` }
      if (code === "spend_limited") return { text: `This key reached its daily number of analyses. Nothing was charged. Try again ${wait(reply.retryAfter)}.` }
      return { text: `The service is busy. Nothing was charged. Try again ${wait(reply.retryAfter)}.`, retry: true }
    case 502: return { text: `The analysis failed${id}. Nothing was charged and your credit was returned. Try again.`, retry: true }
    case 503:
      if (code === "payment_pending") return { text: `The payment is being confirmed${id}. Retry the same request ${wait(reply.retryAfter)}; never pay again for it.`, retry: true }
      if (code === "model_unavailable") return { text: "Food recognition is not available on this server right now. Nothing was charged. Try again later." }
      if (code === "payments_unavailable") return { text: `${noPaymentsText()} Nothing was charged.` }
      return { text: `The service is briefly unavailable${id}. Nothing was charged. Try again in a moment.`, retry: true }
    case 504: return { text: `The analysis took too long${id}. Nothing was charged. Try again.`, retry: true }
    default: return { text: `Unexpected answer (${reply.status}${code ? ` ${code}` : ""}). Nothing was charged.` }
  }
}

/** What this page can say when it cannot take a payment: only true things about this server. */
function noPaymentsText() {
  return x402On()
    ? "This server does not sell card credits, so this page cannot pay for an analysis. Analyses here are paid per call with x402 (0.01 USDC on Base) by programs and AI agents; see the API reference."
    : "This server takes no payments yet, so no analysis can be run. Its operator has not switched on card credits or per-call payments."
}

/** Offers only the payment ways /health says are on; with none the page can use, says so and turns analysis off. */
function applyPaymentWays() {
  const notice = $("payments-off")
  if (cardsOn()) {
    notice.hidden = true
    $("key-panel").hidden = false
    $("analyze").disabled = false
    return
  }
  $("key-panel").hidden = true
  $("analyze").disabled = true
  const p = document.createElement("p")
  p.textContent = noPaymentsText()
  notice.replaceChildren(p)
  if (x402On()) {
    const docs = document.createElement("a")
    docs.href = "/docs"
    docs.textContent = "API reference"
    const more = document.createElement("p")
    more.append("How to pay per call: the ", docs, ".")
    notice.append(more)
  }
  notice.hidden = false
}

/** The footer: who runs this server, how to reach them, their terms and privacy policy. */
function showOperator() {
  const { name, terms_url: terms, privacy_url: privacy } = operator()
  const line = $("operator")
  line.replaceChildren()
  const parts = []
  if (name) parts.push([`Run by ${name}`])
  const link = contactLink()
  if (link) parts.push(["Support: ", link])
  for (const [href, label] of [[terms, "Terms and refunds"], [privacy, "Privacy"]]) {
    if (!href) continue
    const a = document.createElement("a")
    a.href = href
    a.textContent = label
    a.rel = "noopener"
    parts.push([a])
  }
  if (parts.length === 0) parts.push(["This server's operator has not published a name or a support contact."])
  for (const [i, part] of parts.entries()) line.append(...(i > 0 ? [" · "] : []), ...part)
}

function showMessage(text, { error = false, retry = null, buy = false, support = false } = {}) {
  const box = $("message")
  box.replaceChildren()
  box.hidden = false
  box.classList.toggle("error", error)
  const p = document.createElement("p")
  p.textContent = text
  box.append(p)
  if (support) box.append(contactParagraph("A person reviews paused keys."))
  if (buy && !cardsOn()) buy = false
  if (retry) box.append(button("Retry the same request", retry))
  if (buy) box.append(button("Buy 500 credits (USD 5.00)", buyCredits))
}

function button(label, onClick) {
  const b = document.createElement("button")
  b.type = "button"
  b.textContent = label
  b.addEventListener("click", onClick)
  return b
}

// ---- keys and balance ----

function saveKey(key) {
  if (key) localStorage.setItem(KEY_STORE, key)
  else localStorage.removeItem(KEY_STORE)
}

async function refreshBalance() {
  const key = currentKey()
  const status = $("key-status")
  if (!key) { status.textContent = "No key yet: generate one or paste yours."; return }
  if (!cardsOn()) { status.textContent = ""; return }
  const reply = await call((client) => client.balance(), key)
  if (reply.status === 200) {
    const { credits_remaining: credits, blocked } = reply.body
    status.replaceChildren(blocked ? `Balance: ${credits} credits — key paused pending support review.` : `Balance: ${credits} credits.`)
    if (blocked) status.append(contactParagraph(""))
    // A purchase announced earlier is no longer the latest news once the balance has moved.
    if (state.announced !== undefined && state.announced !== credits) clearReturn()
  } else if (reply.status === 401) {
    status.textContent = "This key is not active yet: buy credits to activate it."
  } else {
    status.textContent = explain(reply).text
  }
}

function clearReturn() {
  $("return-panel").hidden = true
  $("return-panel").replaceChildren()
  state.announced = undefined
}

function generateKey() {
  clearReturn()
  const key = keyPrefix() + randomHex(32)
  $("key").value = key
  saveKey(key)
  localStorage.removeItem(ORDER_STORE)
  $("key-once").textContent = key
  $("key-warning").hidden = false
  refreshBalance()
}

// ---- buying credits ----

/** The order of this key that is being bought; kept so a retry reuses the same order_id. */
function storedOrder(key) {
  try {
    const order = JSON.parse(localStorage.getItem(ORDER_STORE) ?? "null")
    return order && order.key === key ? order.order_id : null
  } catch {
    return null
  }
}

async function buyCredits() {
  clearReturn()
  const key = currentKey()
  if (!key) { showMessage("Generate or paste a credit key first; the credits are added to it.", { error: true }); return }
  for (let attempt = 0; attempt < 2; attempt++) {
    let orderId = storedOrder(key)
    if (!orderId) {
      orderId = uuidV4()
      localStorage.setItem(ORDER_STORE, JSON.stringify({ key, order_id: orderId }))
    }
    const reply = await call((client) => client.checkout({ orderId, context: { channel: "website" } }), key)
    if (reply.status === 200 && reply.body.checkout_url) { location.assign(reply.body.checkout_url); return }
    if (reply.status === 200 && reply.body.state) { localStorage.removeItem(ORDER_STORE); continue } // that order is complete: start a new one
    if (reply.status === 409) {
      showMessage("An earlier purchase with this key is still open or unresolved. Finish it, or retry later with the same order.", { error: true })
      return
    }
    showMessage(explain(reply).text, { error: true, retry: reply.status === 503 || reply.status === 0 ? buyCredits : null })
    return
  }
}

/** Back from the checkout: confirm the session (or read the order's state) and show the new balance. */
async function handleReturn() {
  const params = new URLSearchParams(location.search)
  const panel = $("return-panel")
  const say = (text, balance) => {
    panel.hidden = false
    const p = document.createElement("p")
    p.textContent = text
    panel.replaceChildren(p, contactParagraph("Questions about a payment or a refund?"))
    state.announced = balance
  }
  if (location.pathname === "/checkout/cancel") {
    say("Checkout canceled. Nothing was charged. You can buy credits again at any time with the same order.")
  } else if (location.pathname === "/checkout/success") {
    const key = currentKey()
    const sessionId = params.get("session_id")
    if (!key) say("Payment received. Paste the key you bought credits with to see its balance.")
    else if (sessionId && /^cs_(live|test)_[A-Za-z0-9]+$/.test(sessionId)) {
      const reply = await call((client) => client.confirm(sessionId), key)
      if (reply.status === 200) {
        localStorage.removeItem(ORDER_STORE)
        say(`Payment received: your balance is ${reply.body.credits_remaining} credits.`, reply.body.credits_remaining)
      } else say(`Payment received; the credits are on their way. ${explain(reply).text}`)
    } else {
      const orderId = params.get("order_id") ?? storedOrder(key)
      const reply = orderId ? await call((client) => client.checkoutStatus(orderId), key) : null
      if (reply?.status === 200) {
        if (reply.body.state === "paid") localStorage.removeItem(ORDER_STORE)
        say(`Order ${reply.body.state}: your balance is ${reply.body.credits_remaining} credits.`, reply.body.credits_remaining)
      } else say("Payment received. The credits are added within moments; refresh the balance shortly.")
    }
  } else return
  history.replaceState(null, "", "/")
}

// ---- the photo ----

/** Everything that belongs to the previous photo goes: its request, result, message and weighed total. */
function forgetPhoto() {
  state.photo = null
  state.pending = null
  const preview = $("preview")
  if (preview.src.startsWith("blob:")) URL.revokeObjectURL(preview.src)
  preview.hidden = true
  preview.removeAttribute("src")
  $("grams").value = ""
  $("message").hidden = true
  clearResult()
}

async function choosePhoto() {
  const file = $("photo").files[0]
  const status = $("photo-status")
  forgetPhoto()
  if (!file) { status.textContent = ""; return }
  const photo = await preparePhoto(file)
  if (photo.error) { status.textContent = photo.error; return }
  $("preview").src = photo.url
  $("preview").hidden = false
  state.photo = { base64: photo.base64, mime: photo.mime }
  status.textContent = photo.note
}

// ---- analysis ----

function analysisRequest() {
  const body = { image_base64: state.photo.base64, mime_type: state.photo.mime, language: $("language").value }
  const grams = $("grams").value.trim()
  if (grams !== "") body.known_total_grams = Number(grams)
  return body
}

async function analyze(event) {
  event?.preventDefault()
  if (!state.photo) { clearResult(); showMessage("Choose or take a photo of the meal first.", { error: true }); return }
  const grams = $("grams").value.trim()
  if (grams !== "" && !(Number(grams) >= 1 && Number(grams) <= 5000 && /^\d+(\.\d{1,2})?$/.test(grams))) {
    clearResult()
    showMessage("The weighed total must be between 1 and 5000 grams, with at most two decimals.", { error: true })
    return
  }
  const body = analysisRequest()
  const scenario = state.health?.sandbox ? $("scenario").value : ""
  // The same photo and choices again is the same request: it replays, and is never charged twice.
  const same = state.pending && JSON.stringify(state.pending.body) === JSON.stringify(body) && state.pending.scenario === scenario
  state.pending = same ? state.pending : { body, scenario, key: idempotencyKey() }
  await send(state.pending)
}

/** Sends one analysis request; a retry resends exactly the same body and Idempotency-Key (the client waits out in_progress). */
async function send(request) {
  const analyzeButton = $("analyze")
  analyzeButton.disabled = true
  // The previous meal and any purchase notice go before the new answer arrives: what stays on screen is this one's.
  clearResult()
  clearReturn()
  showMessage("Analysing the photo…")
  const photo = Uint8Array.from(atob(request.body.image_base64), (c) => c.charCodeAt(0))
  const { language, known_total_grams: knownTotalGrams } = request.body
  const reply = await call((client) => client.analyze(photo, { language, knownTotalGrams, idempotencyKey: request.key, scenario: request.scenario || undefined }), currentKey() || undefined)
  analyzeButton.disabled = false
  if (reply.status === 200) {
    $("message").hidden = true
    render(reply.body)
    refreshBalance()
    return
  }
  const { text, retry, buy, support } = explain(reply)
  showMessage(text, { error: true, retry: retry ? () => send(request) : null, buy, support })
  refreshBalance()
}

// ---- start ----

async function start() {
  const health = await call((client) => client.health())
  state.health = health.status === 200 ? health.body : null
  applyPaymentWays()
  showOperator()
  if (state.health?.sandbox) {
    $("sandbox-banner").hidden = false
    $("scenario-row").hidden = false
  }
  $("key").placeholder = `${keyPrefix()}…`
  $("key").value = localStorage.getItem(KEY_STORE) ?? ""
  $("key").addEventListener("change", () => { saveKey(currentKey()); refreshBalance() })
  $("show-key").addEventListener("click", (e) => {
    const shown = $("key").type === "text"
    $("key").type = shown ? "password" : "text"
    e.currentTarget.textContent = shown ? "Show" : "Hide"
    e.currentTarget.setAttribute("aria-pressed", String(!shown))
  })
  $("key-form").addEventListener("submit", (e) => { e.preventDefault(); saveKey(currentKey()); refreshBalance() })
  $("new-key").addEventListener("click", generateKey)
  $("buy").addEventListener("click", buyCredits)
  $("refresh-balance").addEventListener("click", refreshBalance)
  $("photo").addEventListener("change", choosePhoto)
  $("analyze-form").addEventListener("submit", analyze)
  await handleReturn()
  await refreshBalance()
}

start()
