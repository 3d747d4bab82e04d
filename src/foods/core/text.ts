/** Food vocabulary for matching: normalisation, preparation-state words and common names in USDA wording; stemming is Porter's. */
import { stemmer as porter } from "stemmer"

/** USDA phrases whose words mean something else alone ("dry heat" is cooked, not dry). Applied to both sides. */
const SHARED_PHRASES: ReadonlyArray<readonly [RegExp, string]> = [
  [/\bdry[ -]heat\b/g, " dryheat "],
  // Roasting without oil is roasting: "Nuts, almonds, dry roasted" is no dry form of almonds.
  [/\bdry[ -]roasted\b/g, " roasted "],
  [/\bmoist[ -]heat\b/g, " moistheat "],
  [/\bhard[ -]boiled\b/g, " hardboiled "],
  [/\bsoft[ -]boiled\b/g, " softboiled "],
  [/\bpan[ -]fried\b/g, " panfried "],
  [/\bpan[ -]browned\b/g, " panfried "],
  [/\bpan[ -]seared\b/g, " panfried "],
  [/\bstir[ -]fried\b/g, " panfried "],
  [/\bdeep[ -]fried\b/g, " fried "],
  [/\boven[ -]heated\b/g, " heated "],
  [/\bas purchased\b/g, " unprepared "],
  [/\bair[ -]fried\b/g, " baked "],
  [/\boven[ -](?=roasted|baked)/g, " "],
  [/\bready[ -]to[ -](?:eat|serve|drink)\b/g, " "],
  [/\bnot further specified\b|\bnfs\b|\bns as to [a-z ]+/g, " "],
  [/\bwhole[ -]wheat\b/g, " wholewheat "],
  [/\bwhole[ -]grain\b/g, " wholegrain "],
  [/\bpeanut butter\b/g, " peanutbutter "],
  [/\bice creams?\b/g, " icecream "],
  [/\bbaby ?foods?\b/g, " babyfood "],
  [/\bsweet potato(?:es)?\b/g, " sweetpotato "],
  [/\bsoy sauce\b/g, " soysauce "],
  [/\bfrench fried\b/g, " frenchfried "],
  [/\bsalad or cooking\b/g, " "],
  [/\b(?:extra[ -])?virgin\b/g, " "]
]

/**
 * Common names as a vision model writes them, mapped to the words USDA records use. The head noun stays last,
 * because the matcher reads the last content word of a query as its head ("chicken breast" → breast).
 */
const COMMON_NAMES: ReadonlyArray<readonly [RegExp, string]> = [
  [/\b(?:french fries|fries|chips and fries|potato fries|frites)\b/g, " potatoes frenchfried "],
  [/\bhash ?browns?\b/g, " potatoes hash brown "],
  [/\bmashed potato(?:es)?\b/g, " potatoes mashed "],
  [/\b(?:baked|jacket) potato(?:es)?\b/g, " baked flesh skin potatoes "],
  [/\bpotato chips?\b|\bcrisps\b/g, " snacks potato chips "],
  [/\bspaghetti squash\b/g, " squash spaghetti "],
  [/\b(spaghetti|linguine|penne|fettuccine|rigatoni|fusilli|farfalle|tagliatelle|macaroni|rotini|orzo)\b/g, " $1|pasta "],
  [/\bbolognese\b|\bmeat sauce\b|\bragu\b/g, " with meat sauce "],
  [/\bmarinara\b|\bpasta sauce\b|\btomato sauce\b/g, " pasta sauce marinara "],
  [/\bground beef\b|\bminced beef\b|\bbeef mince\b|\bhamburger meat\b/g, " beef ground "],
  [/\bbeef patty\b|\bburger patty\b|\bhamburger patty\b/g, " beef ground patty "],
  [/\b(sirloin|ribeye|rib eye|t-bone|strip|flank|round) steak\b/g, " beef $1 steak "],
  [/(?<!turkey )\bbacon\b/g, " pork cured bacon "],
  [/\bprawns?\b/g, " shrimp "],
  [/\bcalamari\b/g, " squid "],
  [/\bgarlic cloves?\b/g, " garlic "],
  [/\b(scallops?|mussels?|clams?|oysters?|squid|octopus)\b(?! chowder)/g, " mollusks $1 "],
  [/\byoghurt\b/g, " yogurt "],
  [/\b(?:oatmeal|porridge|rolled oats)\b/g, " cereals oats "],
  [/\baubergines?\b/g, " eggplant "],
  [/\b(?:courgettes?|zucchinis?)\b/g, " squash summer zucchini "],
  [/\b(?:scallions?|spring onions?|green onions?)\b/g, " onions spring scallions "],
  [/\b(red|green|yellow|orange)? ?bell peppers?\b/g, " peppers sweet $1 "],
  [/\bcapsicum\b/g, " peppers sweet "],
  [/\b(?:chill?i|jalapeno) peppers?\b/g, " peppers hot chili "],
  [/\bmayo\b/g, " mayonnaise "],
  [/\b(?:soda|cola|soft drink|coke)\b/g, " carbonated beverage cola "],
  [/\b(?:black )?coffee\b/g, " brewed coffee "],
  [/\b(?:black |green )?tea\b/g, " brewed tea "],
  [/\bgarbanzos?(?: beans)?\b/g, " chickpeas "],
  [/\bmixed (?:salad )?greens\b|\bsalad greens\b|\bspring mix\b/g, " lettuce green leaf "],
  [/\bromaine\b/g, " lettuce cos romaine "],
  [/\bskim milk\b/g, " milk nonfat "],
  [/\b(?:jam|jelly|preserves)\b/g, " jams preserves "],
  [/(?<!french )\btoast\b/g, " toasted bread "],
  [/\bbread roll\b|\bdinner roll\b/g, " rolls dinner "],
  [/\bheavy cream\b|\bwhipping cream\b/g, " cream heavy whipping "],
  [/\bgreen beans\b|\bstring beans\b/g, " beans snap green "],
  [/\bcorn on the cob\b|\bsweet ?corn\b/g, " corn sweet yellow "],
  [/\b(?:oil and vinegar|vinegar and oil)(?: dressing)?\b/g, " salad dressing home recipe vinegar|oil "],
  [/\b(?:balsamic |red wine |herb |italian )?vinaigrette\b|\bitalian dressing\b/g, " salad dressing italian "],
  [/\bpb\b/g, " peanutbutter "],
  [/\b(?:salsa|pico de gallo)\b/g, " salsa sauce "],
  [/(?<!(?:salmon|tuna|fish|beef|halibut|swordfish|cauliflower|ham|turkey|pork) )\bsteak\b(?! fr)/g, " beef steak "],
  [/\bcilantro\b/g, " coriander cilantro leaves "],
  [/\b(?:jasmine|basmati)(?: rice)?\b|\b(?:long grain|steamed white) rice\b/g, " white long grain rice "],
  [/\bsushi rice\b/g, " white short grain rice "],
  [/\bblack olives?\b/g, " ripe olives "],
  [/\b(?:cherry|grape|roma|plum) tomato(?:es)?\b/g, " red ripe tomatoes "],
  [/\bkiwi(?:fruit)?s?\b/g, " kiwifruit "],
  [/\bcollard greens\b/g, " collards "],
  [/\bbok choy\b|\bpak choi\b/g, " cabbage chinese pak choi "],
  [/\bcool whip\b|\bwhipped topping\b/g, " dessert topping semi solid "],
  [/\bnutella\b|\bhazelnut spread\b/g, " chocolate hazelnut spread "],
  [/\boreos?(?: cookies?)?\b/g, " chocolate sandwich creme cookies "],
  [/\bpop ?tarts?\b/g, " fruit toaster pastries "],
  [/\bjell-?o\b/g, " gelatin desserts "],
  [/\bsriracha(?: sauce)?\b/g, " hot chile sriracha sauce "],
  [/\b(barbecue|bbq|oyster|fish) sauce\b/g, " sauce $1 "],
  [/\btahini\b/g, " seeds sesame butter tahini "],
  [/\bgeneral tsos?\b/g, " general tso "],
  [/\bgrilled chicken\b(?! (?:thigh|wing|drumstick|leg|breast))/g, " grilled chicken breast "],
  [/\begg rolls?\b/g, " chinese egg rolls "],
  [/\b(?:vegetable|cooking|salad|frying) oil\b|^\s*oil\s*$/g, " oil canola "],
  [/\bghee\b|\bclarified butter\b/g, " butter oil anhydrous "],
  [/\bpulled pork\b/g, " roasted pork shoulder "],
  [/\bgrilled cheese(?: sandwich)?\b/g, " grilled cheese sandwich "],
  [/\bbean sprouts\b/g, " mung beans sprouted "],
  [/\bsoy ?milk\b/g, " soymilk "],
  [/\bmac (?:and|n) cheese\b/g, " macaroni and cheese "],
  [/^\s*(?:flour |whole wheat |spinach )?(?:tortilla )?wraps?\s*$/g, " flour tortillas "],
  [/\bstring cheese\b/g, " cheese mozzarella low moisture part skim "],
  [/\bpepper ?jack(?: cheese)?\b/g, " cheese monterey "],
  [/\b(?:donuts?|doughnuts?)\b/g, " doughnuts "],
  [/\b(?:sparkling water|club soda|seltzer(?: water)?|soda water)\b/g, " beverages carbonated club soda "],
  [/\bblack[ -]eyed peas\b/g, " cowpeas common blackeyes "],
  [/\btater tots?\b/g, " potato puffs "],
  [/\bchocolate chips\b(?! cookie)/g, " candies semisweet chocolate "],
  [/\b(?:pumpkin seeds?|pepitas)\b/g, " seeds kernels roasted pumpkin "],
  [/\bflax ?seeds?\b/g, " seeds flaxseed "],
  [/\b(?:mixed )?berries\b/g, " strawberries|blueberries|raspberries|blackberries "],
  [/\b(?:red|white|yellow|sweet|spanish|vidalia) onions?\b/g, " onions "],
  [/(?<!(?:hot|chili|chile|jalapeno|black|banana|cayenne|sweet|bell|red|green|yellow|orange|sweet) )\bpeppers\b/g, " peppers sweet red|green "],
  [/^\s*(?:(?:garden|green|side|house|tossed|mixed green) )?salad\s*$/g, " lettuce green leaf "],
  [/^\s*(?:white )?fish(?: fillets?)?\s*$/g, " fish atlantic cod "],
  [/\bpork chops?\b/g, " pork loin chops "],
  [/(?<!(?:turkey|chicken|pork|cured|prosciutto|parma|serrano) )\bham\b(?! and)/g, " pork cured ham "]
]

/** Query words that say nothing about which record is meant. */
const NOISE = new Set([
  "a",
  "an",
  "the",
  "of",
  "and",
  "or",
  "in",
  "on",
  "some",
  "homemade",
  "home",
  "made",
  "sliced",
  "slice",
  "chopped",
  "diced",
  "cubed",
  "piece",
  "portion",
  "serving",
  "side",
  "bowl",
  "plate",
  "small",
  "medium",
  "large",
  "organic",
  "style",
  "type",
  "food",
  "dish",
  "fresh",
  "plain",
  "regular",
  "cup",
  "topping",
  "mixed",
  "assorted",
  "leftover",
  "lightly",
  "seasoned",
  "fillet",
  "fillets",
  "filet",
  "filets",
  "strip",
  "strips",
  "slices",
  "pieces",
  "chunks",
  "bites",
  "baby",
  "shredded",
  "grated",
  "crumbled",
  "minced",
  "cut",
  "wedge",
  "wedges",
  "florets",
  "cafeteria",
  "classic",
  "traditional",
  "freshly"
])

/** Words that describe how a food is prepared rather than which food it is. */
export type StateWord =
  | "raw"
  | "cooked"
  | "boiled"
  | "steamed"
  | "grilled"
  | "broiled"
  | "roasted"
  | "baked"
  | "fried"
  | "panfried"
  | "sauteed"
  | "braised"
  | "stewed"
  | "simmered"
  | "poached"
  | "scrambled"
  | "hardboiled"
  | "softboiled"
  | "microwaved"
  | "heated"
  | "toasted"
  | "dryheat"
  | "moistheat"
  | "dry"
  | "dried"
  | "dehydrated"
  | "powder"
  | "concentrate"
  | "unprepared"
  | "uncooked"
  | "canned"
  | "frozen"
  | "smoked"

const STATE_WORDS = new Map<string, StateWord>([
  ["raw", "raw"],
  ["uncooked", "uncooked"],
  ["unprepared", "unprepared"],
  ["cooked", "cooked"],
  ["prepared", "cooked"],
  ["boiled", "boiled"],
  ["steamed", "steamed"],
  ["grilled", "grilled"],
  ["broiled", "broiled"],
  ["barbecued", "grilled"],
  ["bbq", "grilled"],
  ["chargrilled", "grilled"],
  ["roast", "roasted"],
  ["roasted", "roasted"],
  ["rotisserie", "roasted"],
  ["baked", "baked"],
  ["fried", "fried"],
  ["panfried", "panfried"],
  ["sauteed", "panfried"],
  ["seared", "panfried"],
  ["caramelized", "panfried"],
  ["caramelised", "panfried"],
  ["charred", "grilled"],
  ["blackened", "grilled"],
  ["braised", "braised"],
  ["stewed", "stewed"],
  ["simmered", "simmered"],
  ["poached", "poached"],
  ["scrambled", "scrambled"],
  ["hardboiled", "hardboiled"],
  ["softboiled", "softboiled"],
  ["microwaved", "microwaved"],
  ["heated", "heated"],
  ["toasted", "toasted"],
  ["dryheat", "dryheat"],
  ["moistheat", "moistheat"],
  ["dry", "dry"],
  ["dried", "dried"],
  ["dehydrated", "dehydrated"],
  ["powder", "powder"],
  ["powdered", "powder"],
  ["concentrate", "concentrate"],
  ["condensed", "concentrate"],
  ["canned", "canned"],
  ["frozen", "frozen"],
  ["smoked", "smoked"]
])

export const stateOf = (token: string): StateWord | undefined => STATE_WORDS.get(token)

/**
 * Results of a pure function kept by their argument, at most this many (then it starts afresh): building the index
 * stems the same few thousand words over and over.
 */
const REMEMBERED = 16_384

const remembered = <A>(cache: Map<string, A>, key: string, f: (key: string) => A): A => {
  const known = cache.get(key)
  if (known !== undefined) return known
  const value = f(key)
  if (cache.size >= REMEMBERED) cache.clear()
  cache.set(key, value)
  return value
}

const stems = new Map<string, string>()

/**
 * Porter's English stemmer, so that "tomatoes", "tomato" and "mashed", "mash" meet. Preparation words are kept whole:
 * they are read as states, not as names ("fried" and "fries" are not one word here).
 */
export const stem = (word: string): string => (STATE_WORDS.has(word) ? word : remembered(stems, word, porter))

const baseNormalise = (text: string) =>
  text
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .replace(/['\u2019]/g, "")
    .replace(/&/g, " and ")

const applyPhrases = (text: string, phrases: ReadonlyArray<readonly [RegExp, string]>) =>
  phrases.reduce((acc, [pattern, replacement]) => acc.replace(pattern, replacement), text)

const words = (text: string) => text.split(/[^a-z0-9%]+/).filter((w) => w.length > 0)

/** One word of a query with the spellings that satisfy it ("spaghetti" is also USDA's "pasta"). */
export type QueryTerm = ReadonlyArray<string>

/** Tokens of a USDA description, segment by segment (segment 0 is the food's head, e.g. "Rice"). */
export const descriptionSegments = (description: string): ReadonlyArray<ReadonlyArray<string>> =>
  description
    .replace(/\([^)]*\)?/g, " ")
    .split(/[,;]/)
    .map((segment) => words(applyPhrases(baseNormalise(segment), SHARED_PHRASES)).map(stem))
    .filter((segment) => segment.length > 0)

/** Words of a description's parenthetical asides ("(includes sourdough)"): they may match a query but never count against it. */
export const descriptionAsides = (description: string): ReadonlyArray<string> =>
  [...description.matchAll(/\(([^)]*)\)?/g)].flatMap((m) => words(applyPhrases(baseNormalise(m[1] ?? ""), SHARED_PHRASES)).map(stem))

/** Terms of a model's query after mapping common names to USDA wording; noise words dropped. */
export const queryTerms = (query: string): ReadonlyArray<QueryTerm> =>
  applyPhrases(applyPhrases(baseNormalise(query), COMMON_NAMES), SHARED_PHRASES)
    .split(/[^a-z0-9%|]+/)
    .map((group) => group.split("|").filter((w) => w.length > 0 && !NOISE.has(w)).map(stem))
    .filter((alternatives) => alternatives.length > 0)

/** Words that may stand before a generic name without making it specific ("mixed" does: "mixed nuts" is a record). */
const GENERIC_NOISE = new Set([...NOISE].filter((w) => w !== "mixed" && w !== "assorted"))

/** A query's own words (no common-name mapping), stemmed and sorted, without noise or preparation words: "roasted mixed nuts" → "mix nut". */
export const plainKey = (query: string): string =>
  words(applyPhrases(baseNormalise(query), SHARED_PHRASES))
    .filter((w) => !GENERIC_NOISE.has(w) && stateOf(w) === undefined)
    .map(stem)
    .sort()
    .join(" ")

/** Brand names in a USDA description, as query words: SR28 writes brands in capitals ("KRAFT", "McDONALD'S"), and in a branded record the other capitalised words name the product ("Gatorade"). */
export const brandWords = (description: string): ReadonlyArray<string> => {
  const body = description.replace(/\([^)]*\)?/g, " ")
  if (!/\b(?!USDA\b|NFS\b|UPC\b)[A-Z]{2,}[A-Z'&.-]*\b/.test(body)) return []
  return [...body.matchAll(/(?<=[\s,])(?!USDA\b|NFS\b|UPC\b)[A-Z][A-Za-z'&.-]*/g)].flatMap((m) => words(baseNormalise(m[0])).map(stem))
}

/** Character trigrams of a word, padded like pg_trgm, for correcting misspelt query words. */
export const trigrams = (word: string): ReadonlyArray<string> => {
  const padded = `  ${word} `
  const out = new Set<string>()
  for (let i = 0; i + 3 <= padded.length; i++) out.add(padded.slice(i, i + 3))
  return [...out]
}
