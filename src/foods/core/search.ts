/** Food search and lookups over the matcher's index: the ranking of a text without a model's estimate, as a person means it. */
import { Option } from "effect"
import { type FoodIndex, PREPARED_QUERIES } from "./foodIndex.ts"
import { isTrusted, rank } from "./matcher.ts"
import type { FoodRecord } from "./records.ts"
import { fuzzyPostings, prefixPostings } from "./terms.ts"

const NO_GUESS = { kcal: 0, protein_g: 0, carbs_g: 0, fat_g: 0 }

/** Ids of an index, made the first time one is looked up. */
const byId = new WeakMap<FoodIndex, ReadonlyMap<string, FoodRecord>>()

export const foodIn = (index: FoodIndex, fdcId: string): Option.Option<FoodRecord> => {
  let ids = byId.get(index)
  if (ids === undefined) {
    ids = new Map(index.foods.map((f) => [f.record.sourceId, f.record]))
    byId.set(index, ids)
  }
  return Option.fromNullable(ids.get(fdcId))
}

/**
 * The foods for a text, best first: the records the matcher would trust for it, ranked without an estimate (its
 * plain, everyday record first), then the records that merely share its words, so a half-typed name still finds some.
 */
export const searchIn = (index: FoodIndex, text: string, limit: number): ReadonlyArray<FoodRecord> => {
  const key = `${limit}\u0000${text}`
  const known = index.searches.get(key)
  if (known !== undefined) return known
  const found = searchAfresh(index, text, limit)
  if (index.searches.size >= PREPARED_QUERIES) index.searches.clear()
  index.searches.set(key, found)
  return found
}

/**
 * What a search may read beyond the matcher's candidates, whatever its text: a few of its words, priced in postings
 * (record fields) with their prefixes and misspellings before anything is searched. "s" or "ch" begins words of
 * thousands of records and is matched whole; the words that fit the budget, the most selective first, are searched.
 */
const FALLBACK_WORDS_PRICED = 8
const FALLBACK_POSTINGS = 4000
const PREFIX_MIN = 2
const FUZZY_MIN = 3
const FUZZY_MAX = 2
const FALLBACK_FIELDS = ["name", "description", "common"]

interface WordPlan {
  readonly prefix: boolean
  readonly fuzzy: number | false
}

/** The words searched, each with whether its prefix and its misspellings are, within the budget. */
const fallbackPlan = (index: FoodIndex, words: ReadonlyArray<string>): ReadonlyMap<string, WordPlan> => {
  const priced = words.slice(0, FALLBACK_WORDS_PRICED).map((word) => ({ word, exact: index.terms.postings.get(word) ?? 0 }))
  priced.sort((a, b) => a.exact - b.exact)
  let left = FALLBACK_POSTINGS
  const chosen: Array<{ readonly word: string; readonly exact: number }> = []
  for (const p of priced) {
    if (p.exact > left) continue
    left -= p.exact
    chosen.push(p)
  }
  const plan = new Map<string, WordPlan>()
  for (const { word, exact } of chosen) {
    let prefix = false
    if (word.length >= PREFIX_MIN) {
      const more = prefixPostings(index.terms, word) - exact
      if (more <= left) {
        left -= more
        prefix = true
      }
    }
    let fuzzy: number | false = false
    const distance = Math.min(FUZZY_MAX, Math.round(word.length * 0.2))
    if (word.length >= FUZZY_MIN && distance > 0) {
      const more = fuzzyPostings(index.terms, word, distance) - exact
      if (more <= left) {
        left -= more
        fuzzy = distance
      }
    }
    plan.set(word, { prefix, fuzzy })
  }
  return plan
}

const searchAfresh = (index: FoodIndex, text: string, limit: number): ReadonlyArray<FoodRecord> => {
  const ranked = rank(index, { query: text, guessPer100g: NO_GUESS }, limit, { ignoreGuess: true, everyday: true })
  const out: Array<FoodRecord> = ranked.map((c) => c.record)
  if (out.length >= limit) return out
  const seen = new Set(out)
  const words = [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])]
  const plan = fallbackPlan(index, words)
  if (plan.size === 0) return out
  const hits = index.search.search([...plan.keys()].join(" "), {
    prefix: (term) => plan.get(term)?.prefix === true,
    fuzzy: (term) => plan.get(term)?.fuzzy ?? false,
    combineWith: "AND",
    fields: FALLBACK_FIELDS
  })
  for (const hit of hits) {
    const record = index.foods[hit.id as number]?.record
    if (record === undefined || seen.has(record)) continue
    seen.add(record)
    out.push(record)
    if (out.length >= limit) break
  }
  return out
}

/** The record a food typed in words names, judged as an analysis query is but without the model's estimate. */
export const namedIn = (index: FoodIndex, text: string): Option.Option<FoodRecord> =>
  Option.fromNullable(rank(index, { query: text, guessPer100g: NO_GUESS }, 3, { ignoreGuess: true, everyday: true }).find(isTrusted)?.record)

/** The records the matcher would trust for a text typed in words, best first (at most 25): the first is `namedIn`'s. */
export const trustedIn = (index: FoodIndex, text: string, limit: number): ReadonlyArray<FoodRecord> =>
  rank(index, { query: text, guessPer100g: NO_GUESS }, Math.max(3, Math.min(limit, 25)), { ignoreGuess: true, everyday: true })
    .filter(isTrusted)
    .slice(0, limit)
    .map((c) => c.record)
