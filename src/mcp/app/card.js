// The card inside a chat (an MCP App): analyze_food's result in the web page's look, corrected here if need be, and a
// photo picked here, made fit here (shrunk, or converted to JPEG) and analysed through the host with the connection's
// key. `McpApp` (the App class), `render`, `clear`, `preparePhoto` (the web page's) and `makeCorrections` come before it.
const el = (id) => document.getElementById(id)

const app = new McpApp({ name: "morsel card", version: "1.0.0" }, {})
const corrections = makeCorrections({ app, render })

function showMessage(text) {
  el("message").textContent = text
  el("message").hidden = text === ""
}

/** The morsel error of a failed call (the first text, or the second after an x402 challenge). */
function errorOf(result) {
  for (const block of result.content ?? []) {
    if (block.type !== "text") continue
    try {
      const value = JSON.parse(block.text)
      if (value?.error?.message) return value.error
    } catch {}
  }
  return null
}

/** A tool result: the card for an analysis, the error's own words otherwise (never beside an earlier meal). */
function show(result) {
  const content = result.structuredContent
  if (!result.isError && content && Array.isArray(content.items)) {
    showMessage("")
    render(content)
    corrections.start(content)
    return true
  }
  corrections.stop()
  clear()
  const error = errorOf(result)
  showMessage(
    error?.code === "payment_required"
      ? "This connection has no credit key: set Authorization: Bearer <key> on it to analyse photos here."
      : error?.message ?? "The analysis did not return a result."
  )
  return false
}

app.ontoolresult = (result) => show(result)

/** Everything of the previous photo goes, as on the web page: its preview, message and result. */
function forgetPhoto() {
  const preview = el("preview")
  if (preview.src.startsWith("blob:")) URL.revokeObjectURL(preview.src)
  preview.hidden = true
  preview.removeAttribute("src")
  showMessage("")
  corrections.stop()
  clear()
}

async function analyzePhoto() {
  const file = el("photo").files[0]
  const status = el("photo-status")
  forgetPhoto()
  if (!file) { status.textContent = ""; return }
  const photo = await preparePhoto(file)
  if (photo.error) { status.textContent = photo.error; return }
  el("preview").src = photo.url
  el("preview").hidden = false
  status.textContent = `${photo.note} Analysing…`
  // One key per photo: a retry of this very call is a replay, another photo a new analysis.
  const args = { image_base64: photo.base64, mime_type: photo.mime, idempotency_key: `card-${crypto.randomUUID()}` }
  try {
    const result = await app.callServerTool({ name: "analyze_food", arguments: args })
    status.textContent = photo.note
    // The model sees what the user saw: the structured result, not the photo.
    if (show(result)) await app.updateModelContext({ structuredContent: result.structuredContent })
  } catch (error) {
    status.textContent = photo.note
    showMessage(`The analysis could not be reached: ${error instanceof Error ? error.message : String(error)}. Try again.`)
  }
}

el("photo").addEventListener("change", analyzePhoto)
await app.connect()
