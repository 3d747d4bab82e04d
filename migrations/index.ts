/** Every migration, keyed "<number>_<name>" in the order they apply. */
import core from "./0001_core.ts"
import foods from "./0002_foods.ts"
import credits from "./0003_credits.ts"

export const migrations = {
  "0001_core": core,
  "0002_foods": foods,
  "0003_credits": credits
}
