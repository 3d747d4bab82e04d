/** Amounts as people write them: digits, decimals, fractions (1/2, 1 1/2, ½, 1½), ranges (2-3) and number words. */

/** A token of a meal's text: a number, a word or one other character, with where it stands in the text. */
export interface Token {
  readonly raw: string
  /** Lower case; a word's trailing period dropped ("tbsp." is "tbsp"). */
  readonly word: string
  readonly kind: "number" | "word" | "mark"
  /** A number token's value. */
  readonly value: number
  readonly start: number
  readonly end: number
}

const VULGAR: Readonly<Record<string, number>> = {
  "½": 1 / 2,
  "¼": 1 / 4,
  "¾": 3 / 4,
  "⅓": 1 / 3,
  "⅔": 2 / 3,
  "⅛": 1 / 8,
  "⅜": 3 / 8,
  "⅝": 5 / 8,
  "⅞": 7 / 8,
  "⅕": 1 / 5,
  "⅖": 2 / 5,
  "⅗": 3 / 5,
  "⅘": 4 / 5,
  "⅙": 1 / 6,
  "⅚": 5 / 6
}

/**
 * One pass, no backtracking: digits with a decimal point or a decimal comma of one or two places ("1,5"; "1,000" is a
 * thousand), a fraction, digits glued to a vulgar fraction ("1½"), a word (letters, apostrophes, inner hyphens and
 * dots: "tbsp.", "fl.oz"), or any other character. Letters glued to digits are their own token ("150g", "x2").
 */
const TOKEN =
  /(\d{1,3}(?:,\d{3})+(?![\d,])|\d+(?:[.,]\d{1,2}(?![\d,])|\.\d+)?(?:\s*\/\s*\d+)?[½¼¾⅓⅔⅛⅜⅝⅞⅕⅖⅗⅘⅙⅚]?|[½¼¾⅓⅔⅛⅜⅝⅞⅕⅖⅗⅘⅙⅚])|([\p{L}][\p{L}\p{M}'’]*(?:[-.][\p{L}\p{M}'’]+)*\.?)|(\S)/gu

const numberValue = (raw: string): number => {
  const last = raw.at(-1) ?? ""
  const vulgar = VULGAR[last]
  if (vulgar !== undefined) return raw.length === 1 ? vulgar : numberValue(raw.slice(0, -1)) + vulgar
  if (raw.includes("/")) {
    const [a, b] = raw.split("/").map((s) => Number(s.trim()))
    return a !== undefined && b !== undefined && b > 0 ? a / b : Number.NaN
  }
  if (/^\d{1,3}(?:,\d{3})+$/.test(raw)) return Number(raw.replaceAll(",", ""))
  return Number(raw.replace(",", "."))
}

export const tokenize = (text: string, offset = 0): ReadonlyArray<Token> => {
  const out: Array<Token> = []
  for (const m of text.matchAll(TOKEN)) {
    const start = offset + (m.index ?? 0)
    const raw = m[0]
    const end = start + raw.length
    if (m[1] !== undefined) out.push({ raw, word: raw, kind: "number", value: numberValue(raw), start, end })
    else if (m[2] !== undefined) out.push({ raw, word: raw.toLowerCase().replace(/[’]/g, "'").replace(/\.$/, ""), kind: "word", value: 0, start, end })
    else out.push({ raw, word: raw, kind: "mark", value: 0, start, end })
  }
  return out
}

/** Number words: "a" and "an" are one; "a couple" two, "a few" and "several" three, "a dozen" twelve. */
export const NUMBER_WORDS: ReadonlyMap<string, number> = new Map([
  ["a", 1],
  ["an", 1],
  ["one", 1],
  ["two", 2],
  ["three", 3],
  ["four", 4],
  ["five", 5],
  ["six", 6],
  ["seven", 7],
  ["eight", 8],
  ["nine", 9],
  ["ten", 10],
  ["eleven", 11],
  ["twelve", 12],
  ["dozen", 12],
  ["half", 0.5],
  ["quarter", 0.25],
  ["couple", 2],
  ["few", 3],
  ["several", 3],
  ["single", 1],
  ["double", 2],
  ["both", 2]
])

/** A fraction word after "and": "one and a half", "two and a quarter". */
const AND_FRACTIONS: ReadonlyMap<string, number> = new Map([
  ["half", 0.5],
  ["quarter", 0.25],
  ["third", 1 / 3]
])

export interface Amount {
  readonly value: number
  /** Index of the first token after the amount. */
  readonly next: number
}

const isWord = (t: Token | undefined, ...words: ReadonlyArray<string>) => t !== undefined && t.kind === "word" && words.includes(t.word)
const isMark = (t: Token | undefined, ...marks: ReadonlyArray<string>) => t !== undefined && t.kind === "mark" && marks.includes(t.raw)

/** "and a half" / "& 1/2" after an amount or its unit: the part it adds, and the index after it. */
export const andFraction = (tokens: ReadonlyArray<Token>, at: number): Amount | undefined => {
  if (!isWord(tokens[at], "and") && !isMark(tokens[at], "&")) return undefined
  let i = at + 1
  if (isWord(tokens[i], "a", "one")) i++
  const t = tokens[i]
  if (t?.kind === "number" && t.value > 0 && t.value < 1) return { value: t.value, next: i + 1 }
  const f = t?.kind === "word" ? AND_FRACTIONS.get(t.word) : undefined
  return f === undefined ? undefined : { value: f, next: i + 1 }
}

/** A single number at `at`: digits with an optional fraction after them ("1 1/2", "1 ½"), or a number word. */
const single = (tokens: ReadonlyArray<Token>, at: number): Amount | undefined => {
  const t = tokens[at]
  if (t === undefined) return undefined
  if (t.kind === "number") {
    if (!Number.isFinite(t.value)) return undefined
    // "1-1/2 cups": a hyphen between a whole number and a fraction joins them.
    const hyphened = tokens[at + 1]?.raw === "-" && tokens[at + 1]?.start === t.end && tokens[at + 2]?.start === tokens[at + 1]?.end
    const after = tokens[hyphened ? at + 2 : at + 1]
    if (hyphened && Number.isInteger(t.value) && after?.kind === "number" && after.value > 0 && after.value < 1 && after.raw.includes("/"))
      return { value: t.value + after.value, next: at + 3 }
    if (Number.isInteger(t.value) && after?.kind === "number" && after.value > 0 && after.value < 1 && /[/½¼¾⅓⅔⅛⅜⅝⅞⅕⅖⅗⅘⅙⅚]/.test(after.raw))
      return { value: t.value + after.value, next: at + 2 }
    return { value: t.value, next: at + 1 }
  }
  if (t.kind !== "word") return undefined
  // "a couple of", "a few", "a dozen", "a half", "a quarter": the article belongs to the number word.
  if ((t.word === "a" || t.word === "an") && isWord(tokens[at + 1], "couple", "few", "dozen", "half", "quarter")) return single(tokens, at + 1)
  if (t.word === "half" || t.word === "quarter") {
    // "half a dozen", "half a cup", "half an apple": the article is the thing halved.
    if (isWord(tokens[at + 1], "a", "an")) {
      if (isWord(tokens[at + 2], "dozen")) return { value: (NUMBER_WORDS.get(t.word) ?? 0) * 12, next: at + 3 }
      return { value: NUMBER_WORDS.get(t.word) ?? 0, next: at + 2 }
    }
    if (isWord(tokens[at + 1], "of")) return { value: NUMBER_WORDS.get(t.word) ?? 0, next: at + 2 }
  }
  const value = NUMBER_WORDS.get(t.word)
  if (value === undefined) return undefined
  // "a dozen", "two dozen"
  if (t.word !== "dozen" && isWord(tokens[at + 1], "dozen")) return { value: value * 12, next: at + 2 }
  return { value, next: at + 1 }
}

/**
 * The amount that starts at `at`, or undefined: a number, "and a half" after it, a range ("2-3", "2 to 3", "2 or 3")
 * read as its middle, "x2" and "2x" as the number.
 */
export const amountAt = (tokens: ReadonlyArray<Token>, at: number): Amount | undefined => {
  let i = at
  if (isWord(tokens[i], "x") && tokens[i + 1]?.kind === "number") i++
  const first = single(tokens, i)
  if (first === undefined) return undefined
  let { value, next } = first
  const more = andFraction(tokens, next)
  if (more !== undefined && value >= 1 && Number.isInteger(value)) ({ value, next } = { value: value + more.value, next: more.next })
  // A range is read as its middle: "2-3 eggs" are 2.5 eggs.
  if (isMark(tokens[next], "-", "–", "—") || isWord(tokens[next], "to", "or")) {
    const upper = tokens[next + 1]?.kind === "number" || (tokens[i]?.kind === "word" && tokens[next + 1]?.kind === "word") ? single(tokens, next + 1) : undefined
    if (upper !== undefined && upper.value > value) ({ value, next } = { value: (value + upper.value) / 2, next: upper.next })
  }
  if (isWord(tokens[next], "x") || isMark(tokens[next], "×", "*")) next++
  if (!(value > 0) || !Number.isFinite(value)) return undefined
  return { value, next }
}
