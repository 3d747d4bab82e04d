// The estimate on the page: the table of items and totals, and the ring of energy from protein, carbohydrate and fat.
const $ = (id) => document.getElementById(id)

const fmt = (n, digits = 1) => Number(n).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })

/** The column of each cell: its label (shown above the figure on an item card) and its class. */
const COLUMNS = [
  { label: "Component", className: "name" },
  { label: "Grams" },
  { label: "kcal" },
  { label: "Protein g" },
  { label: "Carbs g" },
  { label: "Fat g" },
  { label: "Source", className: "source" },
  { label: "Correct", className: "edit" }
]

function cells(tr, values, tag = "td", from = 0) {
  values.forEach((value, i) => {
    const cell = document.createElement(tag)
    const column = COLUMNS[from + i]
    cell.dataset.label = column.label
    if (column.className) cell.className = column.className
    if (value instanceof Node) cell.append(value)
    else cell.textContent = value
    tr.append(cell)
  })
  return tr
}

/** Takes the previous meal off the page, so a new analysis or an error never sits beside it. */
export function clear() {
  $("result").hidden = true
  $("rows").replaceChildren()
  $("totals").replaceChildren()
  $("request-id").textContent = ""
  $("dish").textContent = "Result"
}

/** An analysis result (SPEC §2.2) as the page shows it. */
export function render(result) {
  show({
    title: result.dish_name,
    items: result.items.map((item) => ({ ...item, grams: item.estimated_grams })),
    totals: result.totals,
    total_grams: result.estimated_total_grams,
    request_id: result.request_id
  })
}

/** The USDA record or the model's own figures an item's numbers come from. */
function sourceOf(item) {
  const source = document.createElement("span")
  source.textContent = item.nutrition_source === "usda" ? "USDA" : "AI estimate"
  if (item.matched_name) {
    const small = document.createElement("small")
    small.textContent = item.matched_name
    source.append(small)
  }
  return source
}

/** The component's name, with what was read from the person's words (or the amount they gave) and a mark when they corrected it. */
function nameOf(item) {
  const name = document.createElement("span")
  name.textContent = item.name
  if (item.amount && !item.read) {
    const small = document.createElement("small")
    small.textContent = item.amount
    name.append(" ", small)
  }
  if (item.corrected) {
    const badge = document.createElement("span")
    badge.className = "badge"
    badge.textContent = "corrected"
    name.append(" ", badge)
  }
  // Beneath the name, on a line of its own: the words this food was read from and how its grams were found.
  if (item.read) {
    const read = document.createElement("small")
    read.className = "read"
    read.textContent = item.read
    name.append(" ", read)
  }
  return name
}

/**
 * A meal: `items` with `name`, `grams` and, when counted, `nutrition`, `nutrition_source`, `matched_name`; an item
 * not found has `nutrition` null and a `note` in place of its figures. `controls(item, index)`, when given, fills a
 * last column; `incomplete` marks the total; `scroll` brings the result into view (a first showing, not an update).
 */
export function show(meal, { controls, incomplete = false, scroll = true } = {}) {
  $("dish").textContent = meal.title
  const rows = $("rows")
  rows.replaceChildren()
  const extra = (item, index) => (controls ? [controls(item, index)] : [])
  meal.items.forEach((item, index) => {
    const tr = document.createElement("tr")
    if (item.corrected) tr.className = "corrected"
    if (item.nutrition) {
      const n = item.nutrition
      cells(tr, [nameOf(item), fmt(item.grams), fmt(n.kcal, 0), fmt(n.protein_g), fmt(n.carbs_g), fmt(n.fat_g), sourceOf(item), ...extra(item, index)])
    } else {
      tr.className = "unmatched"
      cells(tr, [nameOf(item), item.grams ? fmt(item.grams) : "—"])
      // In place of the figures and the source: why it is not counted, and what to do.
      const note = document.createElement("td")
      note.className = "note"
      note.colSpan = 5
      note.append(item.note ?? "Not found: not counted.")
      tr.append(note)
      if (controls) cells(tr, extra(item, index), "td", 7)
    }
    rows.append(tr)
  })
  const t = meal.totals
  const total = document.createElement("tr")
  cells(total, [incomplete ? "Total, incomplete" : "Total"], "th")
  total.firstChild.scope = "row"
  cells(total, [fmt(meal.total_grams), fmt(t.kcal, 0), fmt(t.protein_g), fmt(t.carbs_g), fmt(t.fat_g), "", ...(controls ? [""] : [])], "td", 1)
  $("totals").replaceChildren(total)
  for (const th of document.querySelectorAll("#result thead .edit")) th.remove()
  if (controls) cells(document.querySelector("#result thead tr"), ["Correct"], "th", 7).lastChild.scope = "col"
  drawChart(t)
  $("request-id").textContent = meal.request_id ?? ""
  $("request-id").parentElement.hidden = !meal.request_id
  $("result").hidden = false
  if (scroll) $("result").scrollIntoView({ behavior: "smooth", block: "start" })
}

/** Protein, carbohydrate and fat as shares of their energy (4, 4 and 9 kcal per gram), as a ring. */
function drawChart(totals) {
  const parts = [
    { name: "Protein", kcal: totals.protein_g * 4, color: "#1f6f43" },
    { name: "Carbohydrate", kcal: totals.carbs_g * 4, color: "#2b59c3" },
    { name: "Fat", kcal: totals.fat_g * 9, color: "#b35c00" }
  ]
  const sum = parts.reduce((s, p) => s + p.kcal, 0)
  const svg = $("chart")
  const ns = "http://www.w3.org/2000/svg"
  for (const circle of svg.querySelectorAll("circle")) circle.remove()
  const ring = (color, dash, offset) => {
    const c = document.createElementNS(ns, "circle")
    for (const [k, v] of Object.entries({ cx: 21, cy: 21, r: 15.915, fill: "none", "stroke-width": 7, stroke: color, "stroke-dasharray": dash, "stroke-dashoffset": offset })) c.setAttribute(k, v)
    svg.append(c)
  }
  ring("#e3e7e1", "100 0", 0)
  let start = 25
  const legend = document.createElement("ul")
  legend.className = "legend"
  for (const part of parts) {
    const share = sum > 0 ? (part.kcal / sum) * 100 : 0
    if (share > 0) ring(part.color, `${share} ${100 - share}`, start)
    start -= share
    const li = document.createElement("li")
    const swatch = document.createElement("span")
    swatch.className = "swatch"
    swatch.style.background = part.color
    li.append(swatch, `${part.name} ${Math.round(share)} % of energy`)
    legend.append(li)
  }
  const caption = $("chart-caption")
  caption.replaceChildren("Energy from macronutrients", legend)
}
