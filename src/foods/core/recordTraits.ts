/** What a USDA description says about its record before any query: how usual it is, its odd parts and flavours, diet variants. */
import type { FoodRecord } from "./records.ts"

/** Food groups whose foods are eaten cooked: with no preparation named, a raw record is unlikely. */
const COOKED_GROUPS = new Set([
  "Poultry Products",
  "Beef Products",
  "Pork Products",
  "Lamb, Veal, and Game Products",
  "Finfish and Shellfish Products",
  "Cereal Grains and Pasta",
  "Legumes and Legume Products",
  "Sausages and Luncheon Meats"
])

export const isCookedByDefault = (record: FoodRecord) => COOKED_GROUPS.has(record.foodGroup ?? "")

const GROUP_PRIOR = new Map([
  ["Fast Foods", -0.3],
  ["Restaurant Foods", -0.1],
  ["American Indian/Alaska Native Foods", -1.5]
])

/** Special-diet variants: a plain query means the ordinary food. */
export const DIET_VARIANT = /\b(?:no salt added|lower[ -]fat|reduced[ -]fat|low[ -]?fat|fat[ -]free|nonfat|light|lite|reduced[ -](?:sodium|calorie|sugar)|low[ -](?:sodium|calorie|carb)|sugar[ -]free|no sugar added|diet|imitation|lactose[ -]reduced|gluten[ -]free)\b/

/** Records that describe the usual, averaged food rather than one variety. */
const GENERIC_AVERAGE = /\b(?:all commercial varieties|year round average|all types|mixed species|all grades|all varieties|nfs)\b/

/** Parts and variants nobody means by the plain name of a food ("chicken" is not chicken liver or feet). */
const ODD_PART =
  /\b(liver|giblets|gizzard|heart|kidneys|neck|feet|skin only|tongue|tripe|brain|lungs|spleen|pancreas|thymus|by-products|variety meats|meatless|mechanically separated|added solution|back|wing tip|snout|jowl|fat only)\b/

/** A flavour the plain food does not have ("Snacks, popcorn, cheese-flavor", "tortilla chips, nacho cheese"). */
const FLAVOUR = /\b(?!regular\b|original\b|natural\b|plain\b)([a-z]+)[- ]flavou?r|\b(nacho|ranch|sour cream|chocolate|strawberry)\b/

export const oddPartOf = (description: string): string | undefined => {
  const plain = description.replace(/\([^)]*\)/g, "")
  const odd = ODD_PART.exec(plain)?.[1] ?? FLAVOUR.exec(plain)?.slice(1).find((w) => w !== undefined)
  return odd?.split(" ")[0]
}

/** Records a dietitian picks when a food is named without a variety or cut: the usual one. */
const TYPICAL = [
  /^fish, salmon, atlantic, farmed, cooked/,
  /^fish, tuna, light, canned in water/,
  /^fish, cod, atlantic, cooked/,
  /^beef, top sirloin, steak, separable lean and fat, trimmed to 0" fat, all grades, cooked/,
  /^pork, fresh, loin, whole, separable lean only, cooked, roasted/,
  /^tomatoes, red, ripe, raw, year round average/,
  /^sugars, granulated/,
  /^ice creams, vanilla$/,
  /^snacks, pretzels, hard, plain, salted/,
  /^soymilk, original and vanilla, unfortified/,
  /^frozen yogurts, vanilla/,
  /^milk, whole, 3\.25% milkfat, with added vitamin d/,
  /^cheese, cottage, creamed, large or small curd/,
  /^beef, ground, 85% lean meat \/ 15% fat, patty, cooked, broiled/,
  /^chicken, broilers or fryers, (?:[a-z]+, )?meat (?:only|and skin), (?:cooked, )?roasted/,
  /^soy sauce made from soy and wheat \(shoyu\)$/,
  /^turkey, (?:whole|breast, from whole bird), meat only, (?:cooked, )?roasted/,
  /^rice, white, long-grain, regular, enriched, cooked/,
  /^potatoes, baked, flesh and skin, without salt/,
  /^sweet potato, cooked, baked in skin, flesh, without salt/,
  /^pork, cured, bacon, pre-sliced, cooked, pan-fried/,
  /^tofu, raw, regular/
]

/** Food-group and typical-record prior, independent of the query (brands are weighed against the query's words). */
export const recordPrior = (record: FoodRecord): number => {
  const description = record.description.toLowerCase()
  let prior = (GROUP_PRIOR.get(record.foodGroup ?? "") ?? 0) + (record.surveyed ? 0.3 : 0)
  if (TYPICAL.some((pattern) => pattern.test(description))) prior += 0.5
  if (description.startsWith("school lunch")) prior -= 1
  if (description.startsWith("usda commodity")) prior -= 0.6
  if (/\brestaurant\b/.test(description) && record.foodGroup !== "Restaurant Foods") prior -= 0.3
  if (GENERIC_AVERAGE.test(description)) prior += 0.25
  return prior
}

/**
 * Forms that make a prepared food another dish than the plain one ("Potatoes, mashed", "Corn, creamed"): a record
 * in such a form fits only a query that names it, and a query naming one wants it.
 */
const FORM = /\b(mashed|scalloped|au gratin|candied|pickled|glazed|stuffed|dressed|with dressing|with sauce|in sauce|with gravy|with vegetables|with fruit)\b/

/** The form a description or a query names, if any ("with dressing" and "dressed" are one form). */
export const formOf = (text: string): string | undefined => {
  const form = FORM.exec(text.toLowerCase().replace(/\([^)]*\)/g, ""))?.[1]
  return form === "with dressing" ? "dressed" : form === "in sauce" ? "with sauce" : form
}
