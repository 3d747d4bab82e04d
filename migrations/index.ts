/** Every migration, keyed "<number>_<name>" in the order they apply. */
import core from "./0001_core.ts"
import foods from "./0002_foods.ts"
import credits from "./0003_credits.ts"
import x402 from "./0004_x402.ts"
import limits from "./0005_limits.ts"
import x402SettlerNonces from "./0006_x402_settler_nonces.ts"
import creditReversals from "./0007_credit_reversals.ts"
import dropTrigrams from "./0008_drop_pg_trgm.ts"
import foodDescriptors from "./0009_food_descriptors.ts"
import slotReleaseOnSave from "./0010_slot_release_on_save.ts"
import foodNutrients from "./0011_food_nutrients.ts"
import foodLimits from "./0012_food_limits.ts"
import modelCalls from "./0013_model_calls.ts"
import creditGrantsByKey from "./0014_credit_grants_by_key.ts"
import foodCallDigests from "./0015_food_call_digests.ts"

export const migrations = {
  "0001_core": core,
  "0002_foods": foods,
  "0003_credits": credits,
  "0004_x402": x402,
  "0005_limits": limits,
  "0006_x402_settler_nonces": x402SettlerNonces,
  "0007_credit_reversals": creditReversals,
  "0008_drop_pg_trgm": dropTrigrams,
  "0009_food_descriptors": foodDescriptors,
  "0010_slot_release_on_save": slotReleaseOnSave,
  "0011_food_nutrients": foodNutrients,
  "0012_food_limits": foodLimits,
  "0013_model_calls": modelCalls,
  "0014_credit_grants_by_key": creditGrantsByKey,
  "0015_food_call_digests": foodCallDigests
}
