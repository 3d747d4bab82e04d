/** `morsel fooddb import <dir|zip>`: loads USDA SR28 ASCII files or a FoodData Central CSV download into the database. */
import { Args, Command } from "@effect/cli"
import { Console, Effect } from "effect"
import { withProgress } from "../../terminal.ts"
import { importFoods } from "../core/importer.ts"

const importCommand = Command.make(
  "import",
  {
    path: Args.path({ name: "dir|zip", exists: "yes" }).pipe(
      Args.withDescription("a folder or zip holding USDA SR28 ASCII files (FOOD_DES.txt, …) or a FoodData Central CSV download (food.csv, …)")
    )
  },
  ({ path }) =>
    Effect.gen(function* () {
      const summary = yield* importFoods(path).pipe(withProgress(`importing USDA food data from ${path}…`))
      for (const d of summary.datasets) {
        yield* Console.log(`${d.label} (${d.kind}): ${d.foods} foods, ${d.portions} portions${d.removed > 0 ? `, ${d.removed} removed` : ""}`)
      }
    })
).pipe(
  Command.withDescription(
    "Import USDA food data (Foundation, SR Legacy and FNDDS survey foods, or SR28) idempotently: a re-import replaces, never duplicates"
  )
)

/** Needs a SqlClient (the caller provides the Database layer). */
export const fooddbCommand = Command.make("fooddb").pipe(
  Command.withSubcommands([importCommand]),
  Command.withDescription("The local USDA food-composition database")
)
