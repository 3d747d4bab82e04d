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

/** Names that hold "and", "&" or "with" and are one food. */
const WHOLE_NAMES =
  /\b(?:mac(?:aroni)?\s+(?:and|&|n|'n'?)\s+cheese|peanut\s+butter\s+(?:and|&|n)\s+jelly|pb\s*(?:and|&|n)\s*j|salt\s+(?:and|&)\s+pepper|half\s+(?:and|&)\s+half|half-and-half|sweet\s+(?:and|&)\s+sour|pork\s+(?:and|&|n)\s+beans|franks\s+(?:and|&|n)\s+beans|cookies\s+(?:and|&|n)\s+cream|fish\s+(?:and|&|n)\s+chips|surf\s+(?:and|&)\s+turf|bread\s+(?:and|&)\s+butter\s+pickles?|chicken\s+(?:and|&)\s+dumplings|biscuits\s+(?:and|&)\s+gravy|corned\s+beef\s+(?:and|&)\s+cabbage|rice\s+(?:and|&)\s+beans|beans\s+(?:and|&)\s+rice|spaghetti\s+(?:and|&)\s+meatballs|oil\s+(?:and|&)\s+vinegar|cheese\s+(?:and|&)\s+crackers|hot\s+(?:and|&)\s+sour\s+soup|sour\s+cream\s+(?:and|&)\s+onion|strawberries\s+(?:and|&)\s+cream)\b/giu

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
  return words.every((w) => DESCRIBING.has(w))
}

/** The phrases of a text, each trimmed, in order; a text of one food is one phrase. */
export const phrasesOf = (text: string): ReadonlyArray<Span> => {
  // Names that hold a joining word are shielded from the cut by masking their joining words.
  const mask = (name: string) => name.replace(/[\s&+,]|\band\b|\bn\b/giu, (c) => "_".repeat(c.length))
  const shielded = text.replace(WHOLE_NAMES, mask).replace(AMOUNT_AND, (m) => m.replace(/\b(?:and)\b|&/giu, (c) => "_".repeat(c.length)))
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
    const span = trimSpan(text, cut)
    if (span.end <= span.start || isBlank(text, span)) continue
    const before = phrases.at(-1)
    // "150 g rice, cooked": a comma before words that only describe keeps them with the food.
    if (before !== undefined && text.slice(before.end, span.start).trim() === "," && onlyDescribes(text, span)) {
      phrases[phrases.length - 1] = { start: before.start, end: span.end }
      continue
    }
    phrases.push(span)
  }
  return phrases
}
