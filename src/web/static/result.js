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
  { label: "Source", className: "source" }
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

export function render(result) {
  $("dish").textContent = result.dish_name
  const rows = $("rows")
  rows.replaceChildren()
  for (const item of result.items) {
    const source = document.createElement("span")
    source.textContent = item.nutrition_source === "usda" ? "USDA" : "AI estimate"
    if (item.matched_name) {
      const small = document.createElement("small")
      small.textContent = item.matched_name
      source.append(small)
    }
    rows.append(
      cells(document.createElement("tr"), [
        item.name,
        fmt(item.estimated_grams),
        fmt(item.nutrition.kcal, 0),
        fmt(item.nutrition.protein_g),
        fmt(item.nutrition.carbs_g),
        fmt(item.nutrition.fat_g),
        source
      ])
    )
  }
  const t = result.totals
  const total = document.createElement("tr")
  cells(total, ["Total"], "th")
  total.firstChild.scope = "row"
  cells(total, [fmt(result.estimated_total_grams), fmt(t.kcal, 0), fmt(t.protein_g), fmt(t.carbs_g), fmt(t.fat_g), ""], "td", 1)
  $("totals").replaceChildren(total)
  drawChart(t)
  $("request-id").textContent = result.request_id
  $("result").hidden = false
  $("result").scrollIntoView({ behavior: "smooth", block: "start" })
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
