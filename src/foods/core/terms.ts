/**
 * The words of the search index with how many postings (record fields) each has: what a word, its prefixes and its
 * misspellings would make the search read is priced before it is searched, so no text can make it read everything.
 */

export interface TermStats {
  /** The index's words in code-unit order. */
  readonly sorted: ReadonlyArray<string>
  /** Postings of the words before each place in `sorted` (one more entry than words): a range's sum in two reads. */
  readonly before: Float64Array
  /** Places in `sorted` of the words of each length, for pricing misspellings. */
  readonly byLength: ReadonlyMap<number, ReadonlyArray<number>>
  readonly postings: ReadonlyMap<string, number>
}

/** Counts the postings of each word of one record's fields (a word twice in one field is one posting). */
export const countPostings = (counts: Map<string, number>, fields: ReadonlyArray<string>): void => {
  for (const field of fields) {
    for (const term of new Set(field.split(" "))) if (term.length > 0) counts.set(term, (counts.get(term) ?? 0) + 1)
  }
}

export const termStats = (postings: ReadonlyMap<string, number>): TermStats => {
  const sorted = [...postings.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  const before = new Float64Array(sorted.length + 1)
  const byLength = new Map<number, Array<number>>()
  for (const [at, term] of sorted.entries()) {
    before[at + 1] = before[at]! + (postings.get(term) ?? 0)
    const same = byLength.get(term.length)
    if (same === undefined) byLength.set(term.length, [at])
    else same.push(at)
  }
  return { sorted, before, byLength, postings }
}

/** The first place in `sorted` whose word is not below `word`. */
const lowerBound = (sorted: ReadonlyArray<string>, word: string) => {
  let low = 0
  let high = sorted.length
  while (low < high) {
    const mid = (low + high) >> 1
    if (sorted[mid]! < word) low = mid + 1
    else high = mid
  }
  return low
}

/** Postings of every word that begins with `prefix` (the word itself included). */
export const prefixPostings = (stats: TermStats, prefix: string): number => {
  const from = lowerBound(stats.sorted, prefix)
  const to = lowerBound(stats.sorted, `${prefix}\uffff`)
  return stats.before[to]! - stats.before[from]!
}

/**
 * Whether `term` is at most `max` edits from `word` (Levenshtein over two rows the caller lends, each one longer than
 * `word`; stopped as soon as a whole row exceeds `max`).
 */
const within = (word: string, term: string, max: number, rows: readonly [Int32Array, Int32Array]): boolean => {
  let previous = rows[0]
  let row = rows[1]
  for (let j = 0; j <= word.length; j++) previous[j] = j
  for (let i = 1; i <= term.length; i++) {
    row[0] = i
    let best = i
    const c = term.charCodeAt(i - 1)
    for (let j = 1; j <= word.length; j++) {
      let value = previous[j - 1]! + (c === word.charCodeAt(j - 1) ? 0 : 1)
      if (previous[j]! + 1 < value) value = previous[j]! + 1
      if (row[j - 1]! + 1 < value) value = row[j - 1]! + 1
      row[j] = value
      if (value < best) best = value
    }
    if (best > max) return false
    const swap = previous
    previous = row
    row = swap
  }
  return previous[word.length]! <= max
}

/** Postings of every word at most `distance` edits from `word` (the word itself included). */
export const fuzzyPostings = (stats: TermStats, word: string, distance: number): number => {
  const rows = [new Int32Array(word.length + 1), new Int32Array(word.length + 1)] as const
  let total = 0
  for (let length = Math.max(1, word.length - distance); length <= word.length + distance; length++) {
    for (const at of stats.byLength.get(length) ?? []) {
      const term = stats.sorted[at]!
      if (within(word, term, distance, rows)) total += stats.postings.get(term) ?? 0
    }
  }
  return total
}
