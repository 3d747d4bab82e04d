/** The words the matcher treats specially: preparation states and which satisfy one another, USDA's category and class heads, neutral qualifiers. */
import { descriptionSegments, type StateWord, stem } from "./text.ts"

export const DRY_FORMS: ReadonlySet<StateWord> = new Set(["dry", "dried", "dehydrated", "powder", "concentrate"])
export const RAWISH: ReadonlySet<StateWord> = new Set(["raw", "uncooked", "unprepared"])
export const NOT_COOKING: ReadonlySet<StateWord> = new Set([...DRY_FORMS, ...RAWISH, "canned", "frozen", "smoked"])
export const FRIED: ReadonlySet<StateWord> = new Set(["fried", "panfried"])

/** Which record states satisfy a preparation the query names, best first. */
export const EQUIVALENT: Partial<Record<StateWord, ReadonlyArray<StateWord>>> = {
  boiled: ["boiled", "hardboiled", "softboiled", "cooked", "moistheat", "simmered", "stewed", "steamed", "poached"],
  steamed: ["steamed", "boiled", "cooked", "moistheat"],
  grilled: ["grilled", "broiled", "roasted", "dryheat", "baked"],
  broiled: ["broiled", "grilled", "roasted", "dryheat", "baked"],
  roasted: ["roasted", "baked", "dryheat", "broiled", "grilled"],
  baked: ["baked", "roasted", "dryheat", "broiled", "heated"],
  fried: ["fried", "panfried"],
  panfried: ["panfried", "fried", "dryheat"],
  braised: ["braised", "stewed", "simmered", "moistheat"],
  stewed: ["stewed", "braised", "simmered", "moistheat", "boiled"],
  simmered: ["simmered", "stewed", "braised", "moistheat", "boiled"],
  poached: ["poached", "moistheat", "boiled"],
  scrambled: ["scrambled"],
  hardboiled: ["hardboiled", "boiled"],
  softboiled: ["softboiled", "poached", "hardboiled"],
  microwaved: ["microwaved", "cooked", "heated"],
  heated: ["heated", "baked", "cooked", "microwaved"],
  toasted: ["toasted"],
  dryheat: ["dryheat", "roasted", "baked", "broiled", "grilled"],
  moistheat: ["moistheat", "boiled", "braised", "stewed", "simmered"]
}

/** Words as the index holds them (stemmed). */
const stemmed = (words: string): ReadonlySet<string> => new Set(words.split(" ").map(stem))

/** Category words USDA puts before the food itself ("Fast foods, hamburger", "Beverages, coffee"). */
export const CATEGORY_WORDS = stemmed("fast food restaurant beverage alcoholic snack candy cereal spice fish crustacean mollusk nut seed italian chinese mexican latino japanese family style")


/** Qualifiers that do not make a record a different food; a query need not mention them. */
export const NEUTRAL = stemmed(
  "pre sliced with without salt added gram ounce oz per cup enriched unenriched drained regular all commercial commercially variety type grade includes include mature seed solid liquid fluid year round average ns nfs as to form usda vitamin fortified not or and by from"
)

/** Heads that name a class whose members USDA lists in the next segment: "Melons, cantaloupe" is a cantaloupe, "Rolls, hamburger" is not a hamburger. */
export const CLASS_HEADS = stemmed(
  "melon cabbage bread sauce soup cheese seed gravy syrup meat pepper lettuce squash bean pea oil vinegar pickle dessert gelatin topping cereal nut fish crustacean mollusk spice dressing juice tea coffee"
)

/** Words after which a head segment lists ingredients rather than naming the food. */
export const NAME_ENDS = stemmed("made with from in prepared includes con del")

/** SR28 sometimes files procurement notes as common names; they are not names of the food. */
export const usefulCommonNames = (names: string | null) => (names === null || /^includes usda/i.test(names) ? [] : descriptionSegments(names).flat())
