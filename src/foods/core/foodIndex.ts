/** The matcher's warm index: what it reads of each food once (words, head, states, weights) and the BM25+ search over them. */
import MiniSearch from "minisearch"
import { COOKED, entriesScore, everydayOf, isProductOf } from "./everyday.ts"
import { type Family, FAMILIES, type FamilyMember } from "./generic.ts"
import { DIET_VARIANT, formOf, isCookedByDefault, oddPartOf, recordPrior } from "./recordTraits.ts"
import type { FoodRecord } from "./records.ts"
import { countPostings, type TermStats, termStats } from "./terms.ts"
import { brandWords, descriptionAsides, descriptionSegments, plainKey, type StateWord, stateOf, stem } from "./text.ts"
import { CATEGORY_WORDS, DRY_FORMS, NAME_ENDS, NEUTRAL, NOT_COOKING, usefulCommonNames } from "./vocabulary.ts"
import type { IndexedFood, PreparedQuery } from "./shapes.ts"


/** What the search index holds of a record, field by field, as stemmed words separated by spaces. */
export interface SearchDoc {
  readonly id: number
  /** The head segment: "Beans, snap, green, raw" is named by "beans". */
  readonly name: string
  readonly description: string
  readonly common: string
  /** SR28's LanguaL descriptors: the food's source ("buckwheat") and product type. */
  readonly langual: string
  readonly group: string
}

const SEARCH_FIELDS = ["name", "description", "common", "langual", "group"]

/** A name counts twice, another name SR28 gives the food one and a half times, its LanguaL terms half, its food group little. */
export const FIELD_BOOST = { name: 2, description: 1, common: 1.5, langual: 0.5, group: 0.3 }

export interface FoodIndex {
  readonly size: number
  readonly foods: ReadonlyArray<IndexedFood>
  readonly search: MiniSearch<SearchDoc>
  /** The search index's words with their postings: what a search would read is priced before it runs. */
  readonly terms: TermStats
  readonly idf: ReadonlyMap<string, number>
  readonly maxIdf: number
  /** Generic names ("nuts", "seafood") by their plain key, with the family members that stand for them. */
  readonly families: ReadonlyMap<string, { readonly family: Family; readonly members: ReadonlyArray<FamilyMember> }>
  /** Queries already read against this index: a model names the same few foods again and again. */
  readonly prepared: Map<string, PreparedQuery>
  /** Searches already answered from this index, by limit and text (people search the same few foods too). */
  readonly searches: Map<string, ReadonlyArray<FoodRecord>>
}

/** How many prepared queries an index keeps; past that it starts afresh (a query, its retrieval included, costs about 0.5 ms to prepare and rank first). */
export const PREPARED_QUERIES = 1024

/** One copy of each word and of each set of states across the foods of an index. */
const sharing = () => {
  const words = new Map<string, string>()
  const stateSets = new Map<string, ReadonlySet<StateWord>>()
  const terms = new Map<string, string>()
  const word = (w: string) => {
    const known = words.get(w)
    if (known !== undefined) return known
    words.set(w, w)
    return w
  }
  return {
    word,
    words: (list: Iterable<string>): ReadonlyArray<string> => Array.from(list, word),
    /** A food group's or LanguaL list's words as the search index holds them: a few hundred texts shared by 8,789 foods. */
    terms: (text: string): string => {
      const known = terms.get(text)
      if (known !== undefined) return known
      const joined = descriptionSegments(text).flat().join(" ")
      terms.set(text, joined)
      return joined
    },
    states: (states: ReadonlySet<StateWord>): ReadonlySet<StateWord> => {
      const key = [...states].sort().join(" ")
      const known = stateSets.get(key)
      if (known !== undefined) return known
      stateSets.set(key, states)
      return states
    }
  }
}

/** A food with what its index needs of it once: the weights and brand names are set when all foods are read. */
interface StagedFood {
  readonly food: { -readonly [K in keyof IndexedFood]: IndexedFood[K] }
  readonly brands: ReadonlyArray<string> | undefined
  readonly contentTokens: ReadonlyArray<string>
  readonly headTokens: ReadonlyArray<string>
  readonly searchDoc: Omit<SearchDoc, "id">
}

const indexFood = (record: FoodRecord, shared: ReturnType<typeof sharing>): StagedFood => {
  const segments = descriptionSegments(record.description)
  const asides = descriptionAsides(record.description).filter((t) => stateOf(t) === undefined)
  const tokens = new Set<string>(asides)
  const states = new Set<StateWord>()
  const contentTokens = new Set<string>()
  for (const token of segments.flat()) {
    const state = stateOf(token)
    if (state !== undefined) states.add(state)
    else {
      tokens.add(token)
      if (!NEUTRAL.has(token) && !/^[0-9%]+$/.test(token)) contentTokens.add(token)
    }
  }
  const names = new Set(usefulCommonNames(record.commonNames).filter((token) => stateOf(token) === undefined))
  for (const token of names) tokens.add(token)
  const headAt = segments.findIndex((segment) => segment.some((t) => !CATEGORY_WORDS.has(t)))
  const headSegment = segments[headAt] ?? []
  const head = new Set(headSegment.filter((t) => stateOf(t) === undefined && !CATEGORY_WORDS.has(t)))
  // "Soy sauce made from soy and wheat" and "Chili con carne with beans" are named before their ingredients.
  const nameEnd = headSegment.findIndex((t, i) => i > 0 && NAME_ENDS.has(t))
  const named = nameEnd > 0 ? headSegment.slice(0, nameEnd) : headSegment
  // Category words count only as whole segments: "Fast foods, fish sandwich" is a fish sandwich.
  const headNouns = named.filter((t) => stateOf(t) === undefined && !NEUTRAL.has(t))
  const brands = brandWords(record.description)
  const branded = record.manufacturer !== null || brands.length > 0
  const description = record.description.toLowerCase()
  // One object literal of one shape for every food (built with rest and spread, they took a dictionary each).
  const food: StagedFood["food"] = {
    record,
    tokens: shared.words(tokens),
    names: shared.words(names),
    head: shared.words(head),
    headNoun: mapDefined(headNouns[headNouns.length - 1], shared.word),
    specific: shared.words(new Set(segments[headAt + 1] ?? [])),
    states: shared.states(states),
    contentWeight: 0,
    headWeight: 0,
    prior: recordPrior(record),
    brands: undefined,
    oddPart: mapDefined(oddPartOf(description), stem),
    cookedByDefault: isCookedByDefault(record),
    form: formOf(record.description),
    dietVariant: DIET_VARIANT.test(description),
    fried: /\b(?:fried|breaded|batter)/.test(description.replace(/french fried/g, "")),
    babyFood: record.foodGroup === "Baby Foods" || description.startsWith("babyfood") || description.startsWith("infant formula"),
    everyday: everydayOf(record),
    productOf: isProductOf(record),
    rawIsUsual: false
  }
  return {
    food,
    brands: branded ? brands : undefined,
    searchDoc: {
      name: headSegment.join(" "),
      // Asides often give the food's other name: "Soy sauce made from soy (tamari)", "Fish, salmon, chinook, smoked, (lox)".
      description: [...segments.flat(), ...asides].join(" "),
      common: [...names].join(" "),
      langual: shared.terms(record.descriptors ?? ""),
      group: shared.terms(record.foodGroup ?? "")
    },
    contentTokens: [...contentTokens],
    headTokens: headNouns.filter((t) => !/^[0-9%]+$/.test(t))
  }
}

const mapDefined = <A, B>(a: A | undefined, f: (a: A) => B): B | undefined => (a === undefined ? undefined : f(a))

/**
 * The steps of building the warm index over every record, search index included: the generator pauses after each
 * food of each pass, so that a caller can let other work run between them (`buildIndexInTurns`).
 */
function* indexing(records: ReadonlyArray<FoodRecord>): Generator<void, FoodIndex> {
  const shared = sharing()
  const staged: Array<StagedFood> = []
  for (const record of records) {
    staged.push(indexFood(record, shared))
    yield
  }
  // A capitalised word is a brand only if no generic record uses it ("Gatorade" is, "Chicken Nuggets" is not).
  const generic = new Set<string>()
  for (const { food, brands } of staged) if (brands === undefined) for (const token of food.tokens) generic.add(token)
  const df = new Map<string, number>()
  for (const { food } of staged) for (const token of food.tokens) df.set(token, (df.get(token) ?? 0) + 1)
  const n = Math.max(1, staged.length)
  const idf = new Map<string, number>()
  for (const [token, count] of df) idf.set(token, Math.log((n + 1) / (count + 0.5)))
  const weigh = (list: ReadonlyArray<string>) => list.reduce((sum, t) => sum + (idf.get(t) ?? 0), 0)
  yield
  // Heads SR28 lists cooked some way other than frying: their raw records are not the usual ones.
  const cookedHeads = new Set<string>()
  for (const { food } of staged) if (!food.fried && COOKED.test(food.record.description.toLowerCase())) cookedHeads.add(food.head.join(" "))
  // How many generic records a food and its kind have ("Wheat flour, white": 20; "Potato flour": 1); brands do not count.
  const entries = new Map<string, number>()
  const kindOf = (food: StagedFood["food"]) => `${food.head.join(" ")}|${food.specific.join(" ")}`
  for (const { food, brands } of staged) if (brands === undefined) entries.set(kindOf(food), (entries.get(kindOf(food)) ?? 0) + 1)
  yield
  const foods: Array<IndexedFood> = staged.map(({ food, brands, contentTokens, headTokens }) => {
    if (brands !== undefined) food.brands = new Set(brands.filter((w) => !generic.has(w)))
    food.contentWeight = weigh(contentTokens)
    food.headWeight = weigh(headTokens)
    food.rawIsUsual = food.cookedByDefault && !cookedHeads.has(food.head.join(" "))
    food.everyday += entriesScore(entries.get(kindOf(food)) ?? 1)
    return food
  })
  yield
  // Fields are already normalised and stemmed: the search index splits on spaces and keeps the words as they are.
  const search = new MiniSearch<SearchDoc>({
    fields: SEARCH_FIELDS,
    tokenize: (text) => text.split(" "),
    processTerm: (term) => (term.length > 0 ? term : null),
    searchOptions: { boost: FIELD_BOOST }
  })
  const postings = new Map<string, number>()
  for (const [id, food] of staged.entries()) {
    const doc = food.searchDoc
    search.add({ id, ...doc })
    countPostings(postings, [doc.name, doc.description, doc.common, doc.langual, doc.group])
    yield
  }
  const terms = termStats(postings)
  yield
  const families = yield* familiesOf(foods)
  return { size: foods.length, foods, search, terms, idf, maxIdf: Math.log(n + 1), families, prepared: new Map(), searches: new Map() }
}

/** Builds the warm index over every record, search index included (0.6–3 s for SR28's 8,789 foods, more on a loaded machine). */
export const buildIndex = (records: ReadonlyArray<FoodRecord>): FoodIndex => {
  const steps = indexing(records)
  for (;;) {
    const step = steps.next()
    if (step.done) return step.value
  }
}

/** How long the index is built at a stretch before the event loop gets its turn (a request waits at most about this long). */
export const BUILD_SLICE_MS = 10

/**
 * Builds the index as `buildIndex` does, giving the event loop its turn every BUILD_SLICE_MS: a server answers its
 * requests (GET /health among them) while it builds one, instead of not at all for the seconds that takes.
 */
export const buildIndexInTurns = (records: ReadonlyArray<FoodRecord>, signal?: AbortSignal): Promise<FoodIndex> =>
  new Promise((resolve, reject) => {
    const steps = indexing(records)
    const slice = () => {
      // A server stopped while it builds (interrupted) stops building, rather than holding its process open.
      if (signal?.aborted === true) return reject(signal.reason)
      try {
        const until = performance.now() + BUILD_SLICE_MS
        for (;;) {
          const step = steps.next()
          if (step.done) return resolve(step.value)
          if (performance.now() >= until) return setImmediate(slice)
        }
      } catch (error) {
        reject(error)
      }
    }
    setImmediate(slice)
  })

/** Each generic name's family: its ordinary members (no brands, baby foods, diet variants or odd parts), cooked or raw. */
function* familiesOf(foods: ReadonlyArray<IndexedFood>): Generator<void, ReadonlyMap<string, { family: Family; members: ReadonlyArray<FamilyMember> }>> {
  const out = new Map<string, { family: Family; members: ReadonlyArray<FamilyMember> }>()
  for (const family of FAMILIES) {
    const members: Array<FamilyMember> = []
    for (const food of foods) {
      if (food.brands !== undefined || food.babyFood || food.dietVariant || food.oddPart !== undefined) continue
      if (!family.member(food.record, food.record.description.toLowerCase())) continue
      const cooked = [...food.states].some((state) => !NOT_COOKING.has(state))
      const kept = [...food.states].some((state) => DRY_FORMS.has(state) || state === "frozen" || state === "canned")
      members.push({ record: food.record, states: food.states, cooked, raw: !cooked && !kept })
    }
    for (const name of family.names) out.set(plainKey(name), { family, members })
    yield
  }
  return out
}

/** How many edits a misspelt word may be from a known one: one in four letters, at most three. */
export const spellingDistance = (word: string) => Math.min(3, Math.round(word.length * 0.25))

/** The known word closest to a misspelt one, within one edit in four letters ("brocolli" is "broccoli", "farro" is not "taro"). */
export const correctSpelling = (index: FoodIndex, word: string): string | undefined => {
  if (word.length < 4) return undefined
  const [best] = index.search.autoSuggest(word, { fuzzy: spellingDistance(word), prefix: false, boost: FIELD_BOOST })
  return best?.terms[0]
}
