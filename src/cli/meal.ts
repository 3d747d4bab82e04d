/** `morsel nutrition "2 eggs and a slice of toast"`: a meal in words read by the server, shown with what was read. */
import { Console, Effect, Option, Schema } from "effect"
import { NutritionResult } from "../foods/core/schemas.ts"
import { type Column, table } from "../terminal.ts"
import { type clientOf, use } from "./client.ts"
import { clip, printJson } from "./output.ts"

const n1 = (x: number | null) => (x === null ? "–" : x.toFixed(1))

const WORDS_COLUMNS: ReadonlyArray<Column> = [
  { title: "you wrote" },
  { title: "food" },
  { title: "grams", align: "right" },
  { title: "from" },
  { title: "kcal", align: "right" },
  { title: "protein g", align: "right" },
  { title: "carbs g", align: "right" },
  { title: "fat g", align: "right" },
  { title: "fiber g", align: "right" }
]

type Item = NutritionResult["items"][number]

/** How the grams were found, as a person reads it: "2 × large", "as written", "typical: 1 pat". */
const fromOf = (item: Item) => {
  const portion = item.portion === undefined ? "" : `${item.portion.amount} × ${clip(item.portion.unit, 18)}`
  if (item.grams_basis === "typical") return `typical: ${portion}`
  if (item.grams_basis === "stated") return portion === "" ? "as written" : `as written (${portion})`
  return portion
}

export const mealInWords = (clientEffect: ReturnType<typeof clientOf>, json: boolean, text: string) =>
  Effect.gen(function* () {
    const client = yield* clientEffect
    const body = yield* use(client, (c) => c.nutrition({ text }))
    if (json) return yield* printJson(body)
    const result = Schema.decodeUnknownOption(NutritionResult)(body)
    if (Option.isNone(result)) return yield* printJson(body)
    const r = result.value
    const rows = r.items.map((i) => [
      clip(i.text ?? i.query, 28),
      clip(i.matched_name, 36),
      i.grams.toFixed(1),
      fromOf(i),
      n1(i.nutrition.kcal),
      n1(i.nutrition.protein_g),
      n1(i.nutrition.carbs_g),
      n1(i.nutrition.fat_g),
      n1(i.nutrition.fiber_g)
    ])
    const t = r.totals
    const lines = r.items.length === 0 ? [] : [table(WORDS_COLUMNS, rows, ["total", "", r.total_grams.toFixed(1), "", n1(t.kcal), n1(t.protein_g), n1(t.carbs_g), n1(t.fat_g), n1(t.fiber_g)])]
    for (const u of r.unmatched) {
      const near = u.suggestions.map((s) => `${s.name} (${s.fdc_id})`).join("; ")
      lines.push(`not counted: "${u.text ?? u.query}" — no food read${near ? `; nearest: ${near}` : ""}`)
    }
    if (r.items.some((i) => i.grams_basis === "typical")) lines.push("typical: no amount was given, so one typical serving is counted; say how much for a closer figure")
    if (!r.complete) lines.push("incomplete: the totals leave out the foods above; write them otherwise or give food=grams")
    lines.push(`An estimate (matcher ${r.matcher_version}), not medical or allergen advice.`)
    yield* Console.log(lines.join("\n"))
  })
