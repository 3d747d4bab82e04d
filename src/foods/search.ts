/** Food search and lookups over the matcher's index: the ranking of a text without a model's estimate, as a person means it. */
import { Option } from "effect"
import { type FoodIndex, PREPARED_QUERIES } from "./foodIndex.ts"
import { isTrusted, rank } from "./matcher.ts"
import type { FoodRecord } from "./records.ts"

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

const searchAfresh = (index: FoodIndex, text: string, limit: number): ReadonlyArray<FoodRecord> => {
  const ranked = rank(index, { query: text, guessPer100g: NO_GUESS }, limit, { ignoreGuess: true, everyday: true })
  const out: Array<FoodRecord> = ranked.map((c) => c.record)
  if (out.length >= limit) return out
  const seen = new Set(out)
  const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []
  if (words.length === 0) return out
  for (const hit of index.search.search(words.join(" "), { prefix: true, fuzzy: 0.2, combineWith: "AND", fields: ["name", "description", "common"] })) {
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
