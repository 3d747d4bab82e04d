/** A query as the matcher reads it against an index: its weighted words, states and form, its family, its retrieval. */
import type { Form, FamilyMember } from "./generic.ts"
import { correctSpelling, type FoodIndex, PREPARED_QUERIES, spellingDistance } from "./foodIndex.ts"
import { DIET_VARIANT, formOf } from "./recordTraits.ts"
import { fuzzyPostings } from "./terms.ts"
import { type QueryTerm, queryTerms, plainKey, type StateWord, stateOf, stem } from "./text.ts"
import { DRY_FORMS, EQUIVALENT, FRIED, NOT_COOKING, RAWISH } from "./vocabulary.ts"
import type { PreparedQuery } from "./shapes.ts"


export const prepare = (index: FoodIndex, query: string, backOff = false): PreparedQuery => {
  const key = backOff ? `\u0000${query}` : query
  const known = index.prepared.get(key)
  if (known !== undefined) return known
  if (index.prepared.size >= PREPARED_QUERIES) index.prepared.clear()
  const prepared = prepareAfresh(index, query, backOff)
  index.prepared.set(key, prepared)
  return prepared
}

/**
 * Which members of a family stand for the query: those cooked as it says ("grilled fish" is grilled, broiled or
 * dry-heat fish; "baked beans" are no boiled beans), raw ones for "raw", else the family's usual form.
 */
const familyForm = (usual: Form, methods: ReadonlyArray<StateWord>, raw: boolean): ((member: FamilyMember) => boolean) => {
  if (methods.length > 0) {
    const wanted = new Set<string>(methods.flatMap((m) => [m, ...(EQUIVALENT[m] ?? [])]))
    return (member) => [...member.states].some((s) => wanted.has(s))
  }
  if (raw) return (member) => member.raw
  return usual === "any" ? () => true : usual === "cooked" ? (member) => member.cooked : (member) => member.raw
}

/** Two query words that SR28 writes as one ("snow peas" are "snowpeas", "sweet corn" "sweetcorn") are read as that word. */
const joinCompounds = (index: FoodIndex, terms: ReadonlyArray<QueryTerm>): ReadonlyArray<QueryTerm> => {
  const out: Array<QueryTerm> = []
  for (let i = 0; i < terms.length; i++) {
    const [first, second] = [terms[i]!, terms[i + 1]]
    const joined = second !== undefined && first.length === 1 && second.length === 1 ? stem(`${first[0]}${second[0]}`) : undefined
    if (joined !== undefined && index.idf.has(joined)) {
      out.push([joined])
      i++
    } else out.push(first)
  }
  return out
}

/**
 * What reading one query may cost, whatever its text: the words read (from its end, where the food is named), the
 * misspelt words repaired and the postings their repairs and the retrieval read. A name of a food is far inside
 * them (the longest of the quality sets: 6 words, 4,100 postings); a text past them is read in part, not at length.
 */
const QUERY_TERMS = 16
const SPELLING_FIXES = 3
const SPELLING_WORD_MAX = 24
const SPELLING_POSTINGS = 3000
const RETRIEVAL_POSTINGS = 6000
/** The most records a query's ranking weighs, the most relevant ones. */
const CANDIDATES = 2000

/**
 * The records that hold the query's head word (its last content word), each with its BM25+ relevance to the whole
 * query over the name, description, other names and food group. A query is read once: the result is kept with it.
 */
export const retrieve = (index: FoodIndex, content: ReadonlyArray<{ readonly alternatives: ReadonlyArray<string> }>) => {
  const head = content[content.length - 1]
  if (head === undefined) return []
  // A head in thousands of records (SR28's "product", its food groups' word) names no food: nothing is read for it.
  if (head.alternatives.reduce((sum, w) => sum + (index.terms.postings.get(w) ?? 0), 0) > RETRIEVAL_POSTINGS) return []
  const words = [...new Set(content.flatMap((t) => t.alternatives))]
  // Only records with the head word are wanted: the AND drops the others before any result is built.
  const hits = index.search.search({
    combineWith: "AND",
    queries: [
      { combineWith: "OR", queries: [...head.alternatives] },
      { combineWith: "OR", queries: words }
    ]
  })
  const best = hits.reduce((max, r) => Math.max(max, r.score), 0)
  // Best first: a food's name holds its head word in far fewer records than this ("crab meat": 1,378).
  return hits.slice(0, CANDIDATES).map((r) => ({ food: r.id as number, relevance: best > 0 ? r.score / best : 0 }))
}

/**
 * A query in USDA's order, the food first and then its kind and preparation ("tomatoes, cherry", "chicken breast,
 * grilled": how the vision model is asked to write them), in the order of speech ("cherry tomatoes", "grilled chicken
 * breast"), whose last word is the food: the first segment goes last.
 */
export const inSpokenOrder = (query: string): string => {
  const segments = query.split(",").map((s) => s.trim()).filter((s) => s.length > 0)
  return segments.length < 2 ? query : [...segments.slice(1), segments[0]].join(" ")
}

const prepareAfresh = (index: FoodIndex, written: string, backOff: boolean): PreparedQuery => {
  const query = inSpokenOrder(written)
  const terms = joinCompounds(index, queryTerms(query)).slice(-QUERY_TERMS)
  const states = new Set<StateWord>()
  const content: Array<{ alternatives: ReadonlyArray<string>; weight: number }> = []
  const seen = new Set<string>()
  let fixes = 0
  let spellingRead = 0
  const repaired = new Map<string, string>()
  /** A word the index lacks, repaired while the query's repairs are within their bounds (a word repeated, once). */
  const spelt = (w: string): string => {
    if (index.idf.has(w) || w.length < 4 || w.length > SPELLING_WORD_MAX) return w
    const known = repaired.get(w)
    if (known !== undefined) return known
    let repair = w
    if (fixes < SPELLING_FIXES) {
      fixes++
      spellingRead += fuzzyPostings(index.terms, w, spellingDistance(w))
      if (spellingRead <= SPELLING_POSTINGS) repair = correctSpelling(index, w) ?? w
    }
    repaired.set(w, repair)
    return repair
  }
  for (const term of terms) {
    const state = term.length === 1 ? stateOf(term[0]!) : undefined
    if (state !== undefined) {
      states.add(state)
      continue
    }
    const alternatives: QueryTerm = term.map(spelt)
    const key = alternatives.join("|")
    if (seen.has(key)) continue
    seen.add(key)
    const weight = Math.max(...alternatives.map((w) => index.idf.get(w) ?? index.maxIdf))
    content.push({ alternatives, weight })
  }
  // The retrieval reads every posting of the query's words: the words before the head give way first.
  let read = 0
  for (const term of content) for (const w of term.alternatives) read += index.terms.postings.get(w) ?? 0
  while (read > RETRIEVAL_POSTINGS && content.length > 1) {
    const [dropped] = content.splice(0, 1)
    for (const w of dropped!.alternatives) read -= index.terms.postings.get(w) ?? 0
  }
  // An unknown head names a food SR28 lacks ("chicken shawarma"): it never gives way, and the model's numbers stand.
  const canBackOff = content.length >= 2 && content[content.length - 1]!.alternatives.some((w) => index.idf.has(w))
  if (backOff && canBackOff) content.pop()
  const family = index.families.get(plainKey(query))
  const methods = [...states].filter((s) => !NOT_COOKING.has(s))
  const raw = [...states].some((s) => RAWISH.has(s))
  return {
    family: family === undefined ? undefined : { ...family, inForm: familyForm(family.family.form, methods, raw) },
    canBackOff,
    content,
    totalWeight: content.reduce((sum, t) => sum + t.weight, 0),
    words: new Set(content.flatMap((t) => t.alternatives)),
    states,
    methods,
    dry: [...states].some((s) => DRY_FORMS.has(s)),
    raw,
    fried: [...states].some((s) => FRIED.has(s)),
    form: formOf(query),
    wantsBabyFood: content.some((t) => t.alternatives.some((w) => w === "babyfood" || w === "infant")),
    wantsDietVariant: DIET_VARIANT.test(query.toLowerCase())
  }
}

