/**
 * A meal in words read into foods, each with the words it was read from, its food words and its amount: "For lunch I
 * had 2 large eggs, a slice of toast with butter" is eggs (2 × large), toast (1 × slice) and butter (no amount).
 */
import { amountAt, andFraction, type Token, tokenize } from "./numbers.ts"
import { phrasesOf, type Span } from "./split.ts"
import { containerOf, householdOf, measureOf, SIZES, singular, type Unit } from "./units.ts"

export interface ReadFood {
  /** The words it was read from, exactly as they stand in the text. */
  readonly text: string
  /** The food's own words ("eggs", "rice, cooked"). */
  readonly query: string
  /** How many of the unit (or, with no unit, how many pieces); absent when no amount is given. */
  readonly amount?: number
  readonly unit?: Unit
}

/** A food's words are at most this long: no food is named in more (and a longer text is no name of one). */
export const QUERY_MAX_CHARS = 200
export const QUERY_MAX_WORDS = 6

const words = (list: string) => list.split(" ")

/** Phrases that open what a person writes and name no food, as word sequences. */
const LEADING: ReadonlyArray<ReadonlyArray<string>> = [
  ...["breakfast", "brunch", "lunch", "dinner", "supper", "dessert", "snack", "snacks", "tea", "lunchtime", "dinnertime", "elevenses"].flatMap((meal) =>
    ["for", "at", "with", "during", "after", "before", "for my", "for a", "as a", "at my", "had for", "ate for"].map((p) => [...words(p), meal])
  ),
  words("in the morning"),
  words("in the afternoon"),
  words("in the evening"),
  words("this morning"),
  words("this afternoon"),
  words("this evening"),
  words("last night"),
  words("a bit of"),
  words("a little bit of"),
  words("a little of"),
  words("a little"),
  words("a lot of"),
  words("lots of"),
  words("plenty of"),
  words("a small amount of"),
  words("a large amount of"),
  words("a portion of"),
  words("a serving of"),
  words("a helping of"),
  words("some of"),
  words("one of"),
  words("at least"),
  words("snacked on"),
  words("i had"),
  words("i ate")
]

/** The sequences by their first word, longest first. */
const LEADING_BY_FIRST: ReadonlyMap<string, ReadonlyArray<ReadonlyArray<string>>> = (() => {
  const by = new Map<string, Array<ReadonlyArray<string>>>()
  for (const s of [...LEADING].sort((a, b) => b.length - a.length)) {
    const list = by.get(s[0] ?? "") ?? []
    list.push(s)
    by.set(s[0] ?? "", list)
  }
  return by
})()

/** Single words that open a phrase and name no food: joining words, the eater, eating verbs, hedges and times. */
const LEADING_WORDS = new Set(
  words(
    "and then also plus with w but so or oh ok okay well just only mostly maybe probably basically like i i've i'd i'm we we've they he she you me my our his her their " +
      "had have has having ate eat eaten eating drank drink drinking drunk got grabbed enjoyed ordered finished consumed " +
      "today yesterday tonight earlier later afterwards after before some about around approximately approx roughly nearly almost over under ~ ≈ leftover leftovers " +
      "the this that these those of was were is are"
  )
)

/** Words that end a phrase and name no food. */
const TRAILING = new Set(
  words(
    "today yesterday tonight too also aswell each total altogether earlier later this morning afternoon evening night for breakfast brunch lunch dinner supper snack dessert as well in the on side at home please thanks"
  )
)

/** A phrase holding only these names no food ("that was it", "nothing else"). */
const NO_FOOD = new Set(
  words(
    "that that's thats it it's was were is are all nothing else more much really very so good great nice yummy tasty delicious lovely i me we a an the and or of to for in on at with my our had have ate drank some bit little lot just only then also too well ok okay yes no not"
  )
)

const isWord = (t: Token | undefined, ...list: ReadonlyArray<string>) => t?.kind === "word" && list.includes(t.word)

/** Meals a label names ("Lunch: ham sandwich", "lunch was pizza"). */
const MEAL_LABELS = new Set(words("breakfast brunch lunch dinner supper dessert snack snacks tea elevenses"))

/** The index after any opening filler. */
const afterLeading = (tokens: ReadonlyArray<Token>, from: number): number => {
  let i = from
  for (;;) {
    const t = tokens[i]
    if (t === undefined) return i
    const label = tokens[i + 1]
    if (t.kind === "word" && MEAL_LABELS.has(t.word) && ((label?.kind === "mark" && label.raw === ":") || isWord(label, "was", "were", "is"))) {
      i += 2
      continue
    }
    if ((t.kind === "word" && LEADING_WORDS.has(t.word)) || (t.kind === "mark" && "~≈:-–—([".includes(t.raw) && t.raw !== "(")) {
      i++
      continue
    }
    const sequence = t.kind === "word" ? LEADING_BY_FIRST.get(t.word)?.find((s) => s.every((w, k) => tokens[i + k]?.kind === "word" && tokens[i + k]?.word === w)) : undefined
    if (sequence === undefined) return i
    i += sequence.length
  }
}

/** A unit at `at` (after an amount): "fl oz", a measure, a container, a household word, or any word before "of". */
const unitAt = (tokens: ReadonlyArray<Token>, at: number, spelledAmount: boolean): { readonly unit: Unit; readonly next: number } | undefined => {
  const t = tokens[at]
  if (t?.kind !== "word") return undefined
  if ((t.word === "fl" || t.word === "fluid") && isWord(tokens[at + 1], "oz", "ounce", "ounces")) {
    const flOz = measureOf("floz", "floz")
    return flOz === undefined ? undefined : { unit: flOz, next: at + 2 }
  }
  // A size before a unit is part of it: "a large glass of milk" is a glass, "2 big slices" slices.
  if (SIZES.has(t.word)) {
    const after = unitAt(tokens, at + 1, spelledAmount)
    if (after !== undefined && after.unit.kind !== "household") return after
    if (after !== undefined && !SIZES.has(tokens[at + 1]?.word ?? "")) return after
  }
  // One-letter units ("g", "l", "c", "T") only after digits: "a l" is no litre.
  const measure = t.word.length === 1 && spelledAmount ? undefined : measureOf(t.raw, t.word)
  const unit = measure ?? containerOf(t.word) ?? householdOf(t.word)
  if (unit !== undefined) {
    // "2 slices pizza" reads the slice, but a word that is also the food ("2 cookies", "a muffin") stays the food.
    if (unit.kind === "household" && !SIZES.has(t.word) && !isWord(tokens[at + 1], "of") && !hasFoodAfter(tokens, at + 1)) return undefined
    return { unit, next: at + 1 }
  }
  if (isWord(tokens[at + 1], "of") && hasFoodAfter(tokens, at + 2)) return { unit: { kind: "household", name: singular(t.word) }, next: at + 1 }
  return undefined
}

const hasFoodAfter = (tokens: ReadonlyArray<Token>, at: number) => {
  for (let i = at; i < tokens.length; i++) if (tokens[i]?.kind === "word" && !NO_FOOD.has(tokens[i]?.word ?? "")) return true
  return false
}

interface Found {
  amount?: number
  unit?: Unit
}

/** An amount and unit that start at `at`, with the index after them and after "of". */
const amountAndUnit = (tokens: ReadonlyArray<Token>, at: number): (Found & { readonly next: number }) | undefined => {
  const amount = amountAt(tokens, at)
  if (amount === undefined) {
    // "cup of coffee", "slice of pizza": a unit without a number is one.
    const bare = isWord(tokens[at + 1], "of") ? unitAt(tokens, at, false) : undefined
    return bare === undefined ? undefined : { amount: 1, unit: bare.unit, next: skipOf(tokens, bare.next) }
  }
  const spelled = tokens[at]?.kind === "number" || tokens[at + 1]?.kind === "number"
  const unit = unitAt(tokens, amount.next, !spelled)
  if (unit === undefined) return { amount: amount.value, next: skipOf(tokens, amount.next) }
  let value = amount.value
  let next = unit.next
  // "a cup and a half of milk"
  const more = andFraction(tokens, next)
  if (more !== undefined) ({ value, next } = { value: value + more.value, next: more.next })
  return { amount: value, unit: unit.unit, next: skipOf(tokens, next) }
}

const skipOf = (tokens: ReadonlyArray<Token>, at: number) => {
  let i = at
  if (isWord(tokens[i], "of")) i++
  while (isWord(tokens[i], "the", "my", "a", "an", "some", "fresh")) {
    // "of fresh" stays part of the food's words only as a describing word; "a" after "of" is an article here.
    if (tokens[i]?.word === "fresh") break
    i++
  }
  return i
}

/** An amount written after the food ("rice 150g", "eggs x2", "coffee (2 cups)"): where it starts, or undefined. */
const trailingAmount = (tokens: ReadonlyArray<Token>, from: number, end: number): (Found & { readonly start: number; readonly next: number }) | undefined => {
  for (let k = Math.max(from + 1, end - 5); k < end; k++) {
    const t = tokens[k]
    if (t === undefined || (t.kind !== "number" && !(t.kind === "word" && t.word === "x"))) continue
    let found = amountAndUnit(tokens, k)
    if (found === undefined) continue
    // "pizza, 2 slices": a household word closing the phrase is the unit of the food before it.
    const closing = tokens[found.next]
    if (found.unit === undefined && closing?.kind === "word" && found.next + 1 >= end) {
      const unit = containerOf(closing.word) ?? householdOf(closing.word)
      if (unit !== undefined) found = { ...found, unit, next: found.next + 1 }
    }
    let last = found.next
    while (last < end && tokens[last]?.kind === "mark") last++
    if (last >= end) return { ...found, start: k }
  }
  return undefined
}

/** Reads one phrase; undefined when it names no food. */
const readPhrase = (text: string, span: Span): ReadFood | undefined => {
  const tokens = tokenize(text.slice(span.start, span.end), span.start)
  let i = afterLeading(tokens, 0)
  let found: Found = {}
  // "half and half" is cream, not an amount; "a 6 inch sub" is one sub of that size.
  const named = /^half[\s-]*(?:and|&|'?n'?)[\s-]*half\b/i.test(text.slice(tokens[i]?.start ?? span.end, span.end))
  const lead = named ? undefined : amountAndUnit(tokens, i)
  const textStart = tokens[i]?.start ?? span.end
  if (lead !== undefined) {
    found = lead
    i = afterLeading(tokens, lead.next)
    if (lead.unit === undefined && isWord(tokens[i], "inch", "inches", "in", "foot", "footlong")) {
      found = { amount: (lead.amount ?? 1) >= 12 ? 2 : 1 }
      i++
    }
  }
  let end = tokens.length
  /** Where the words read end: the food's last word, or an amount after it. */
  let usedEnd = 0
  // An amount in brackets anywhere, or at the end, when none came first; the brackets are never the food's words.
  const open = tokens.findIndex((t, k) => k >= i && t.raw === "(")
  if (open >= 0) {
    const close = tokens.findIndex((t, k) => k > open && t.raw === ")")
    const inside = amountAndUnit(tokens, afterLeading(tokens, open + 1))
    if (found.amount === undefined && inside !== undefined) {
      found = inside
      usedEnd = (tokens[close] ?? tokens[inside.next - 1])?.end ?? 0
    }
    end = open
    if (close > open) {
      // Words after the brackets still belong to the food ("rice (150 g) cooked" is rare; they are kept).
      const tail = tokens.slice(close + 1).filter((t) => t.kind === "word")
      if (tail.length > 0 && found.amount !== undefined) end = open
    }
  }
  while (end > i && (tokens[end - 1]?.kind === "mark" || TRAILING.has(tokens[end - 1]?.word ?? ""))) end--
  if (found.amount === undefined) {
    const trailing = trailingAmount(tokens, i, end)
    if (trailing !== undefined) {
      found = trailing
      usedEnd = tokens[trailing.next - 1]?.end ?? 0
      end = trailing.start
      while (end > i && (tokens[end - 1]?.kind === "mark" || TRAILING.has(tokens[end - 1]?.word ?? ""))) end--
    }
  }
  const food = tokens.slice(i, end)
  if (!food.some((t) => t.kind === "word" && !NO_FOOD.has(t.word))) return undefined
  const first = food[0]
  const last = food.at(-1)
  if (first === undefined || last === undefined) return undefined
  let query = text.slice(first.start, last.end).replace(/\s+/g, " ").trim()
  const foodWords = query.split(" ")
  if (query.length > QUERY_MAX_CHARS || foodWords.length > QUERY_MAX_WORDS) query = foodWords.slice(0, QUERY_MAX_WORDS).join(" ").slice(0, QUERY_MAX_CHARS)
  return {
    text: text.slice(Math.min(textStart, first.start), Math.max(usedEnd, last.end)).trim(),
    query,
    ...(found.amount === undefined ? {} : { amount: found.amount }),
    ...(found.unit === undefined ? {} : { unit: found.unit })
  }
}

/** Drinks milk is poured into, and what is poured. */
const IN_A_CUP = /\b(?:coffee|tea|espresso|americano)s?$/i
const WHITENER = /^(?:(?:whole|skim|skimmed|semi-skimmed|low-fat|lowfat|2%|1%|oat|almond|soy)\s+)?(?:milk|cream|creamer|half and half)$/i

/** The foods of a meal's text, in order; stops after `max` + 1 foods (a text of more is refused whole). */
export const readMeal = (text: string, max = Number.POSITIVE_INFINITY): ReadonlyArray<ReadFood> => {
  const foods: Array<ReadFood> = []
  let before: { readonly food: ReadFood; readonly end: number } | undefined
  for (const span of phrasesOf(text)) {
    let food = readPhrase(text, span)
    if (food === undefined) continue
    // Milk or cream "with" or "and" a coffee or tea, with no amount, is a splash in it.
    const splash = containerOf("splash")
    if (
      food.amount === undefined &&
      splash !== undefined &&
      before !== undefined &&
      IN_A_CUP.test(before.food.query) &&
      WHITENER.test(food.query) &&
      /\b(?:with|and|w\/|\+|&)/i.test(text.slice(before.end, span.start))
    )
      food = { ...food, amount: 1, unit: splash }
    before = { food, end: span.end }
    foods.push(food)
    if (foods.length > max) break
  }
  return foods
}
