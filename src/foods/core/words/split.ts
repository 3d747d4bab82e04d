/**
 * A meal's text cut into the phrases that may each name a food: lines, sentences, bullets, semicolons, commas, "and",
 * "with", "&", "plus". A comma before words that only describe the food keeps them with it ("150 g rice, cooked"),
 * and names that hold "and" stay whole ("mac and cheese").
 */

export interface Span {
  readonly start: number
  readonly end: number
}

/** Words that only describe a food: after a comma they belong to the food before it ("rice, white, cooked"). */
const DESCRIBING = new Set(
  (
    "cooked raw boiled steamed grilled fried baked roasted toasted scrambled poached mashed broiled stewed braised sauteed sautéed " +
    "white brown wholemeal wholegrain whole-grain whole-wheat multigrain whole skim skimmed semi-skimmed low-fat lowfat nonfat fat-free reduced-fat " +
    "full-fat plain sweetened unsweetened salted unsalted chopped sliced diced shredded grated minced cubed canned frozen dried fresh ripe " +
    "hard-boiled soft-boiled hard soft long-grain short-grain regular instant lean extra extra-lean organic homemade home-made cold hot warm iced " +
    "medium large small boneless skinless skin-on bone-in peeled unpeeled drained light dark red green yellow black sweet sour spicy crispy " +
    "and with without no in oil water salt sugar butter added prepared unprepared uncooked undrained"
  ).split(" ")
)

/** Describing words that are also foods: after a comma they are a new food ("toast, butter") unless a joining word leads them ("cooked in butter"). */
const FOOD_ALSO = new Set(["oil", "water", "salt", "sugar", "butter"])
const LEADS_FOOD = new Set(["in", "no", "without", "added"])

/** Nouns that end a dish's name: an "and" before them joins the dish's fillings ("ham and cheese sandwich"). */
const DISH = "sandwich(?:es)?|subs?|hoagies?|bagels?|biscuits?|wraps?|burritos?|tacos?|quesadillas?|salads?|pizzas?|omelett?es?|pies?|soups?|stews?|croissants?|paninis?|melts?|sliders?|burgers?|rolls?|muffins?|smoothies?|casseroles?|stir[- ]?fry|curry|bowls?"
const DISH_AND = new RegExp(`(?<=\\s)(?:and|&|n)(?=\\s+(?:(?!(?:a|an|the|some|one|two|my)\\s)[\\p{L}'-]+\\s+){1,3}(?:${DISH})\\b)`, "giu")

/** What follows a food and names none: when, where and why it was eaten ("almonds for a snack", "yogurt on the way to work"). */
const FILLER_TAIL =
  /\s+(?:for\s+(?:a\s+|an\s+|my\s+|the\s+)?(?:snack|breakfast|brunch|lunch|dinner|supper|dessert|pudding|treat|afters)\b.*|on\s+the\s+(?:way|go|run|road|train|bus)\b.*|(?:at|in)\s+(?:work|home|school|the\s+office|the\s+gym|my\s+desk|the\s+cinema|the\s+movies|a\s+party|the\s+park)\b.*|(?:at|around|about)\s+\d{1,2}(?:[:.]\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.)?|(?:in|during)\s+the\s+(?:morning|afternoon|evening|night)|(?:this|yesterday|last)\s+(?:morning|afternoon|evening|night)|before\s+bed|after\s+(?:work|school|the\s+gym|dinner|lunch))\s*[.!]?\s*$/iu

/** "X on Y" is two foods ("peanut butter on toast"), but a sandwich "on wheat" names its bread. */
const ON = /\s+on\s+(?:an?\s+|the\s+|some\s+)?/giu
const DISH_ON_BREAD = /\b(?:sandwich(?:es)?|subs?|hoagies?|burgers?|hamburgers?|cheeseburgers?|hot\s+dogs?|paninis?|melts?|wraps?)\s*$/iu

/** A phrase that is only an amount ("2 slices", "150 g"): after a comma it is the amount of the food before it. */
const AMOUNT_ONLY =
  /^(?:about\s+|around\s+|approx\.?\s+|~\s*)?(?:\d+(?:[.,]\d+)?|\d+\s*\/\s*\d+|[½¼¾⅓⅔]|a|an|one|two|three|four|five|six|half)\s*(?:[-\s]?(?:g|grams?|kg|ml|l|oz|ounces?|lbs?|pounds?|cups?|tbsps?|tsps?|tablespoons?|teaspoons?|slices?|pieces?|pcs?|servings?|portions?|scoops?|handfuls?|bowls?|plates?|glass(?:es)?|mugs?|cans?|bottles?|bars?|squares?|strips?|links?|sticks?))?\s*(?:of\s+(?:it|them))?$/iu

/** Names that hold "and", "&" or "with" and are one food. */
const WHOLE_NAMES =
  /\b(?:mac(?:aroni)?\s+(?:and|&|n|'n'?)\s+cheese|peanut\s+butter\s+(?:and|&|n)\s+jelly|pb\s*(?:and|&|n)\s*j|salt\s+(?:and|&)\s+pepper|half\s+(?:and|&)\s+half|half-and-half|sweet\s+(?:and|&)\s+sour|pork\s+(?:and|&|n)\s+beans|franks\s+(?:and|&|n)\s+beans|cookies\s+(?:and|&|n)\s+cream|fish\s+(?:and|&|n)\s+chips|surf\s+(?:and|&)\s+turf|bread\s+(?:and|&)\s+butter\s+pickles?|chicken\s+(?:and|&)\s+dumplings|biscuits\s+(?:and|&)\s+gravy|corned\s+beef\s+(?:and|&)\s+cabbage|spaghetti\s+(?:and|&)\s+meatballs|oil\s+(?:and|&)\s+vinegar|cheese\s+(?:and|&)\s+crackers|hot\s+(?:and|&)\s+sour\s+soup|sour\s+cream\s+(?:and|&)\s+onion|strawberries\s+(?:and|&)\s+cream)\b/giu

/** "one and a half", "a cup and a half", "2 & 1/2": an amount's "and" joins nothing. */
const AMOUNT_AND =
  /(?:\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a|an|cups?|tablespoons?|teaspoons?|tbsps?|tsps?|pounds?|lbs?|ounces?|oz|slices?|pieces?|glass(?:es)?|mugs?|bowls?))\s+(?:and|&)\s+(?:a\s+|one\s+)?(?:half|quarter|third|\d\/\d|[½¼¾⅓⅔])(?![\p{L}])/giu

/**
 * Where a phrase ends: a line break, a semicolon, a sentence's end (a period not inside a number and not after a unit's
 * abbreviation), a comma not inside a number, and the joining words.
 */
const BREAK = /\r?\n|[;|•·]|(?<!\b(?:tbsp|tbsps|tsp|tsps|tbs|tbl|tbls|tblsp|oz|ozs|fl|lb|lbs|gr|grs|gm|gms|kg|kgs|mg|ml|cl|dl|ltr|approx|ca|no|pcs?|pkg|med|lg|sm|qt|pt|gal|\p{Lu}|\p{Ll}))[.!?](?!\d)|,(?!\d)|\s(?:and|plus|with|w\/|also|then|as well as|along with|together with|alongside|followed by|topped with|served with|&|\+)(?=\s)/giu

/** A bullet or list number at a line's start ("- ", "* ", "1. ", "2) "). */
const BULLET = /^\s*(?:[-*–—]+|\d{1,2}[.)])\s+/u

const isBlank = (text: string, span: Span) => !/[\p{L}\p{N}½¼¾⅓⅔⅛]/u.test(text.slice(span.start, span.end))

/** Trims a span of spaces and of marks at its ends that are no part of a food's words. */
export const trimSpan = (text: string, span: Span): Span => {
  let { start, end } = span
  while (start < end && /[\s,.;:!?'"“”‘’()[\]{}\-–—*•·]/u.test(text[start] ?? "")) {
    // "(" and "½" opening a phrase stay; a leading "-" is a bullet.
    if (text[start] === "(" && text.indexOf(")", start) > 0 && text.indexOf(")", start) < end) break
    start++
  }
  while (end > start && /[\s,;:!?'"“”‘’[\]{}\-–—*•·]/u.test(text[end - 1] ?? "")) end--
  // A sentence's last period goes; a unit's ("tbsp.") is part of it only when something follows.
  while (end > start && text[end - 1] === "." && !/\d/.test(text[end - 2] ?? "")) end--
  if (end > start && text[end - 1] === ")" && !text.slice(start, end - 1).includes("(")) end--
  return { start, end }
}

/** Does this phrase only describe the food before it? */
const onlyDescribes = (text: string, span: Span) => {
  const words = text.slice(span.start, span.end).toLowerCase().match(/[\p{L}][\p{L}'-]*/gu)
  if (words === null || /\d/.test(text.slice(span.start, span.end))) return false
  if (!words.every((w) => DESCRIBING.has(w))) return false
  const food = words.findIndex((w) => FOOD_ALSO.has(w))
  return food < 0 || words.slice(0, food).some((w) => LEADS_FOOD.has(w))
}

/** A phrase's span without the filler after its food. */
const withoutTail = (text: string, span: Span): Span => {
  const m = FILLER_TAIL.exec(text.slice(span.start, span.end))
  return m === null || m.index === 0 ? span : trimSpan(text, { start: span.start, end: span.start + m.index })
}

/** A phrase cut at "on" into its foods; a dish's bread after "on" is dropped. */
const cutAtOn = (text: string, span: Span): ReadonlyArray<Span> => {
  const body = text.slice(span.start, span.end)
  for (const m of body.matchAll(ON)) {
    const at = m.index ?? 0
    if (at === 0) continue
    const left = trimSpan(text, { start: span.start, end: span.start + at })
    const right = trimSpan(text, { start: span.start + at + m[0].length, end: span.end })
    if (right.end <= right.start || left.end <= left.start) continue
    if (DISH_ON_BREAD.test(text.slice(left.start, left.end))) return [left]
    return [left, ...cutAtOn(text, right)]
  }
  return [span]
}

/** The phrases of a text, each trimmed, in order; a text of one food is one phrase. */
export const phrasesOf = (text: string): ReadonlyArray<Span> => {
  // Names that hold a joining word are shielded from the cut by masking their joining words.
  const mask = (name: string) => name.replace(/[\s&+,]|\band\b|\bn\b/giu, (c) => "_".repeat(c.length))
  const shielded = text.replace(WHOLE_NAMES, mask).replace(DISH_AND, (m) => "_".repeat(m.length)).replace(AMOUNT_AND, (m) => m.replace(/\b(?:and)\b|&/giu, (c) => "_".repeat(c.length)))
  const cuts: Array<Span> = []
  let from = 0
  for (const line of shielded.matchAll(/[^\n]*(?:\n|$)/g)) {
    const lineStart = line.index ?? 0
    if (line[0].length === 0) {
      if (lineStart >= shielded.length) break
      continue
    }
    const bullet = BULLET.exec(line[0])
    from = lineStart + (bullet === null ? 0 : bullet[0].length)
    const lineEnd = lineStart + line[0].length
    const bodyStart = from
    for (const m of shielded.slice(bodyStart, lineEnd).matchAll(BREAK)) {
      const at = bodyStart + (m.index ?? 0)
      cuts.push({ start: from, end: at })
      from = at + m[0].length
    }
    cuts.push({ start: from, end: lineEnd })
  }
  const phrases: Array<Span> = []
  for (const cut of cuts) {
    const trimmed = trimSpan(text, cut)
    if (trimmed.end <= trimmed.start || isBlank(text, trimmed)) continue
    const before = phrases.at(-1)
    // "pizza, 2 slices": an amount alone after a comma is the amount of the food before it.
    if (before !== undefined && text.slice(before.end, trimmed.start).trim() === "," && AMOUNT_ONLY.test(text.slice(trimmed.start, trimmed.end))) {
      phrases[phrases.length - 1] = { start: before.start, end: trimmed.end }
      continue
    }
    const pieces = cutAtOn(text, withoutTail(text, trimmed))
    const span = pieces[0] ?? trimmed
    if (pieces.length > 1) {
      phrases.push(...pieces)
      continue
    }
    // "150 g rice, cooked": a comma before words that only describe keeps them with the food.
    if (before !== undefined && text.slice(before.end, span.start).trim() === "," && onlyDescribes(text, span)) {
      phrases[phrases.length - 1] = { start: before.start, end: span.end }
      continue
    }
    phrases.push(span)
  }
  return phrases
}
