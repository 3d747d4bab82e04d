/** Every migration, keyed "<number>_<name>" in the order they apply. */
import core from "./0001_core.ts"

export const migrations = {
  "0001_core": core
}
