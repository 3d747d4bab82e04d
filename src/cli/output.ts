/** How the client commands print the server's answers: words and tables for people, the JSON body with --json. */
import { Console, Option, Schema } from "effect"
import { AnalysisResult, Balance, CheckoutResponse, CheckoutStatus } from "../domain/schemas.ts"
import type { FullNutrition, NutritionResult } from "../client/types.ts"
import { type Column, table } from "../terminal.ts"

export const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/** Words for people, or with --json the server's body; a body that is not the expected shape is printed as JSON. */
const printAs =
  <A, I>(schema: Schema.Schema<A, I>, words: (value: A) => string) =>
  (body: unknown, json: boolean) =>
    json
      ? printJson(body)
      : Option.match(Schema.decodeUnknownOption(schema)(body), { onNone: () => printJson(body), onSome: (value) => Console.log(words(value)) })

const n1 = (x: number) => x.toFixed(1)
export const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

/** A meal's columns as `analyze` prints them: each component's grams and its four values. */
export const MEAL_COLUMNS: ReadonlyArray<Column> = [
  { title: "component" },
  { title: "grams", align: "right" },
  { title: "kcal", align: "right" },
  { title: "protein g", align: "right" },
  { title: "carbs g", align: "right" },
  { title: "fat g", align: "right" }
]

const RESULT_COLUMNS: ReadonlyArray<Column> = [...MEAL_COLUMNS, { title: "source" }]

/** The nine more nutrients, as `analyze` names them, with their units and digits. */
const MORE: ReadonlyArray<readonly [keyof FullNutrition, string, number]> = [
  ["fiber_g", "fiber g", 1],
  ["sugars_g", "sugars g", 1],
  ["saturated_fat_g", "sat. fat g", 1],
  ["sodium_mg", "sodium mg", 0],
  ["cholesterol_mg", "chol. mg", 0],
  ["potassium_mg", "potassium mg", 0],
  ["calcium_mg", "calcium mg", 0],
  ["iron_mg", "iron mg", 1],
  ["vitamin_c_mg", "vit. C mg", 1]
]

/**
 * The nine more nutrients of an analysis's USDA items (`names`, in the answer's order) as a table with their totals;
 * "?" where a record lacks a figure (its total then too). `of`: how many components the analysis has.
 */
export const describeMore = (names: ReadonlyArray<string>, answer: NutritionResult, of: number): string => {
  const figure = (value: number | null, digits: number) => (value === null ? "?" : value.toFixed(digits))
  const columns: ReadonlyArray<Column> = [{ title: "more nutrients" }, ...MORE.map(([, title]) => ({ title, align: "right" as const }))]
  const rows = answer.items.map((item, k) => [clip(names[k] ?? item.name, 24), ...MORE.map(([key, , digits]) => figure(item.nutrition[key], digits))])
  const totals = ["total", ...MORE.map(([key, , digits]) => figure(answer.totals[key], digits))]
  const which = answer.items.length === of ? "every component has a USDA record" : `the ${answer.items.length} of ${of} components with a USDA record`
  return `${table(columns, rows, totals)}\nMore nutrients: ${which}; from the free nutrition path, nothing charged.`
}

/** An analysis as a table of components with the meal's totals. */
export const describeResult = (result: AnalysisResult): string => {
  const rows = result.items.map((item) => [
    clip(item.name, 32),
    item.estimated_grams.toFixed(1),
    n1(item.nutrition.kcal),
    n1(item.nutrition.protein_g),
    n1(item.nutrition.carbs_g),
    n1(item.nutrition.fat_g),
    item.nutrition_source === "usda" ? `USDA ${clip(item.matched_name ?? item.fdc_id ?? "", 36)}` : "AI estimate"
  ])
  const t = result.totals
  const totals = ["total", result.estimated_total_grams.toFixed(1), n1(t.kcal), n1(t.protein_g), n1(t.carbs_g), n1(t.fat_g), ""]
  return [
    result.dish_name,
    "",
    table(RESULT_COLUMNS, rows, totals),
    "",
    `An estimate (model ${result.model}, matcher ${result.matcher_version}), not medical or allergen advice.`,
    `request ${result.request_id}`
  ].join("\n")
}

export const printResult = printAs(AnalysisResult, describeResult)
export const printBalance = printAs(
  Balance,
  (b) => `${b.credits_remaining} credits${b.blocked ? ", key paused pending support review" : ""}${b.test_mode ? " (test mode)" : ""}`
)
export const printCheckout = printAs(CheckoutResponse, (c) =>
  c.checkout_url !== undefined
    ? `Pay at ${c.checkout_url}\norder ${c.order_id}: ${c.credits ?? 500} credits for USD ${c.amount_usd ?? "5.00"}`
    : `order ${c.order_id} is already ${c.state ?? "complete"}: no new checkout`
)
export const printStatus = printAs(
  CheckoutStatus,
  (s) =>
    `order ${s.order_id}: ${s.state}${s.checkout_url ? ` — pay at ${s.checkout_url}` : ""}\n${s.credits_remaining} credits${s.blocked ? ", key paused" : ""}${s.test_mode ? " (test mode)" : ""}`
)
