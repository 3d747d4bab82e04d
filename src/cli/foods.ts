/** `morsel foods search` and `morsel nutrition`: the free food database of a running server, as tables or JSON. */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option, Redacted, Schema } from "effect"
import type { NutritionItem } from "../client/types.ts"
import { FoodList, NutritionResult } from "../foods/core/schemas.ts"
import { type Column, table } from "../terminal.ts"
import { baseUrlOption, CliFailure, clientOf, jsonOption, keyOf, keyOption, reportFailure, use } from "./client.ts"
import { mealInWords } from "./meal.ts"
import { clip, MEAL_COLUMNS, printJson } from "./output.ts"

const n1 = (x: number | null) => (x === null ? "–" : x.toFixed(1))

const SEARCH_COLUMNS: ReadonlyArray<Column> = [
  { title: "fdc_id" },
  { title: "food" },
  { title: "kcal/100g", align: "right" },
  { title: "protein g", align: "right" },
  { title: "carbs g", align: "right" },
  { title: "fat g", align: "right" },
  { title: "portion" }
]

const NUTRITION_COLUMNS: ReadonlyArray<Column> = [...MEAL_COLUMNS, { title: "fiber g", align: "right" }, { title: "source" }]

/** The client of a free command: a key only when one is given (the server checks it if sent). */
const foodsClient = (baseUrl: Option.Option<string>, key: Option.Option<Redacted.Redacted>) =>
  clientOf(baseUrl, Option.match(keyOf(key), { onNone: () => ({}), onSome: (k) => ({ apiKey: Redacted.value(k) }) }))

const search = Command.make(
  "search",
  {
    baseUrl: baseUrlOption,
    key: keyOption,
    limit: Options.integer("limit").pipe(Options.withDescription("how many foods, 1–25 (default 10)"), Options.optional),
    json: jsonOption,
    text: Args.text({ name: "text" }).pipe(Args.repeated)
  },
  (options) =>
    Effect.gen(function* () {
      const text = options.text.join(" ").trim()
      if (text.length === 0) return yield* new CliFailure({ message: 'give the food to search for, e.g. morsel foods search "rice, cooked"' })
      const client = yield* foodsClient(options.baseUrl, options.key)
      const body = yield* use(client, (c) => c.searchFoods(text, Option.match(options.limit, { onNone: () => ({}), onSome: (limit) => ({ limit }) })))
      if (options.json) return yield* printJson(body)
      const list = Schema.decodeUnknownOption(FoodList)(body)
      if (Option.isNone(list)) return yield* printJson(body)
      if (list.value.foods.length === 0) return yield* Console.log(`no food fits "${text}"; try fewer or other words`)
      const rows = list.value.foods.map((f) => {
        const p = f.portions[0]
        return [f.fdc_id, clip(f.name, 48), n1(f.per_100g.kcal), n1(f.per_100g.protein_g), n1(f.per_100g.carbs_g), n1(f.per_100g.fat_g), p ? clip(`${p.amount} ${p.unit} = ${p.grams} g`, 28) : ""]
      })
      yield* Console.log(table(SEARCH_COLUMNS, rows))
    }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("Search the server's food database (USDA), the plain everyday record first; free"))

export const foods = Command.make("foods").pipe(Command.withSubcommands([search]), Command.withDescription("The food database of a running server"))

/** `food=amount`: grams (`rice, white, cooked=150`) or a portion (`egg=2 large`); a food of digits only is an fdc_id. */
export const parseFoodAmount = (arg: string): Option.Option<NutritionItem> => {
  const at = arg.lastIndexOf("=")
  if (at <= 0) return Option.none()
  const food = arg.slice(0, at).trim()
  const amount = arg.slice(at + 1).trim()
  const byId = /^\d+$/.test(food)
  const grams = /^(\d+(?:\.\d+)?)\s*g?$/i.exec(amount)
  if (grams?.[1] !== undefined) return Option.some(byId ? { fdc_id: food, grams: Number(grams[1]) } : { query: food, grams: Number(grams[1]) })
  const portion = /^(\d+(?:\.\d+)?|\d+\/\d+)\s+(.+)$/.exec(amount)
  if (portion?.[1] === undefined || portion[2] === undefined) return Option.none()
  const [num, den] = portion[1].split("/")
  const value = den === undefined ? Number(num) : Number(num) / Number(den)
  const used = { amount: value, unit: portion[2] }
  return Option.some(byId ? { fdc_id: food, portion: used } : { query: food, portion: used })
}

export const nutrition = Command.make(
  "nutrition",
  { baseUrl: baseUrlOption, key: keyOption, json: jsonOption, items: Args.text({ name: "food=amount|meal in words" }).pipe(Args.atLeast(1)) },
  (options) =>
    Effect.gen(function* () {
      // Arguments without "=" are a meal in words, read by the server: `morsel nutrition "2 eggs and a slice of toast"`.
      if (options.items.every((arg) => !arg.includes("="))) return yield* mealInWords(foodsClient(options.baseUrl, options.key), options.json, options.items.join(" "))
      const items: Array<NutritionItem> = []
      for (const arg of options.items) {
        const item = parseFoodAmount(arg)
        if (Option.isNone(item)) {
          return yield* new CliFailure({
            message: `"${arg}": write food=grams or food=amount unit ("rice, white, cooked=150" "egg=2 large"), or the whole meal in words without "=" ("2 eggs and a slice of toast")`
          })
        }
        items.push(item.value)
      }
      const client = yield* foodsClient(options.baseUrl, options.key)
      const body = yield* use(client, (c) => c.nutrition(items))
      if (options.json) return yield* printJson(body)
      const result = Schema.decodeUnknownOption(NutritionResult)(body)
      if (Option.isNone(result)) return yield* printJson(body)
      const r = result.value
      const rows = r.items.map((i) => [
        i.portion ? `${clip(i.name, 28)} (${i.portion.amount} ${clip(i.portion.unit, 16)})` : clip(i.name, 40),
        i.grams.toFixed(1),
        n1(i.nutrition.kcal),
        n1(i.nutrition.protein_g),
        n1(i.nutrition.carbs_g),
        n1(i.nutrition.fat_g),
        n1(i.nutrition.fiber_g),
        `USDA ${i.fdc_id}`
      ])
      const t = r.totals
      const lines = [table(NUTRITION_COLUMNS, rows, ["total", r.total_grams.toFixed(1), n1(t.kcal), n1(t.protein_g), n1(t.carbs_g), n1(t.fat_g), n1(t.fiber_g), ""])]
      for (const u of r.unmatched) {
        const near = u.suggestions.map((s) => `${s.name} (${s.fdc_id})`).join("; ")
        lines.push(`not counted: "${u.query}" matched no food${near ? ` — nearest: ${near}` : ""}`)
      }
      if (!r.complete) lines.push("incomplete: the totals leave out the foods above; name them otherwise or give an fdc_id")
      lines.push(`An estimate (matcher ${r.matcher_version}), not medical or allergen advice.`)
      yield* Console.log(lines.join("\n"))
    }).pipe(reportFailure(options.json))
).pipe(
  Command.withDescription(
    'Nutrition of named foods, food=grams or food=amount unit ("rice, white, cooked=150" "egg=2 large"), or of a meal in words ("2 eggs and a slice of toast"); free'
  )
)
