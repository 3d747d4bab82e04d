/** The in-memory matcher: retrieval over what SR28 says of each food (BM25+ with MiniSearch), then re-ranking against the model's guess. */
import { Option } from "effect"
import MiniSearch from "minisearch"
import type { FoodMatch, FoodQuery } from "./FoodDb.ts"
import { type Family, FAMILIES, type FamilyMember, type Form, familyMedian } from "./generic.ts"
import { energyDistance, guessScore, isClose, isPlausible } from "./plausibility.ts"
import { DIET_VARIANT, formOf, isCookedByDefault, oddPartOf, recordPrior } from "./recordTraits.ts"
import type { FoodRecord } from "./records.ts"
import { brandWords, descriptionAsides, descriptionSegments, type QueryTerm, queryTerms, plainKey, type StateWord, stateOf, stem } from "./text.ts"
import {
  CATEGORY_WORDS,
  CLASS_HEADS,
  DRY_FORMS,
  EQUIVALENT,
  FRIED,
  NAME_ENDS,
  NEUTRAL,
  NOT_COOKING,
  RAWISH,
  usefulCommonNames
} from "./vocabulary.ts"

/** Reported in every result; bump it whenever ranking, vocabulary or thresholds change. */
export const MATCHER_VERSION = "usda-match-4"

/**
 * A food as the matcher reads it. Its word lists are arrays of shared strings, and foods with the same states share
 * one set: 8,789 foods of small Sets and separate copies of "chicken" held about twice the memory.
 */
interface IndexedFood {
  readonly record: FoodRecord
  readonly tokens: ReadonlyArray<string>
  /** Words of the other names SR28 gives the food (ComName): "kasha" is buckwheat groats. */
  readonly names: ReadonlyArray<string>
  readonly head: ReadonlyArray<string>
  /** The last word of the head segment: "Salad dressing, caesar" is a dressing, not a salad. */
  readonly headNoun: string | undefined
  /** Words of the segment after the head, USDA's specific name: "Melons, cantaloupe" is a cantaloupe. */
  readonly specific: ReadonlyArray<string>
  readonly states: ReadonlySet<StateWord>
  /** Sum of the idf of the record's content words: what a query leaves unexplained is penalised. */
  readonly contentWeight: number
  /** The same for the head segment ("Carrot juice" is not carrots): words there weigh more. */
  readonly headWeight: number
  /** Food-group and typical-record prior, independent of the query. */
  readonly prior: number
  /** Brand names in the description (stemmed); a branded record is unlikely unless the query names its brand. */
  readonly brands: ReadonlySet<string> | undefined
  /** An unusual part or variant ("liver", "feet", "meatless") the query must name for the record to fit. */
  readonly oddPart: string | undefined
  readonly cookedByDefault: boolean
  /** A form that makes it another dish ("mashed", "creamed", "with dressing"), if any. */
  readonly form: string | undefined
  readonly dietVariant: boolean
  /** Fried, breaded or battered (French fries excepted: "fried" is their name). */
  readonly fried: boolean
  readonly babyFood: boolean
}

/** What the search index holds of a record, field by field, as stemmed words separated by spaces. */
interface SearchDoc {
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
const FIELD_BOOST = { name: 2, description: 1, common: 1.5, langual: 0.5, group: 0.3 }

export interface FoodIndex {
  readonly size: number
  readonly foods: ReadonlyArray<IndexedFood>
  readonly search: MiniSearch<SearchDoc>
  readonly idf: ReadonlyMap<string, number>
  readonly maxIdf: number
  /** Generic names ("nuts", "seafood") by their plain key, with the family members that stand for them. */
  readonly families: ReadonlyMap<string, { readonly family: Family; readonly members: ReadonlyArray<FamilyMember> }>
  /** Queries already read against this index: a model names the same few foods again and again. */
  readonly prepared: Map<string, PreparedQuery>
}

/** How many prepared queries an index keeps; past that it starts afresh (a query, its retrieval included, costs about 0.5 ms to prepare and rank first). */
const PREPARED_QUERIES = 1024

/** One copy of each word and of each set of states across the foods of an index. */
const sharing = () => {
  const words = new Map<string, string>()
  const stateSets = new Map<string, ReadonlySet<StateWord>>()
  const word = (w: string) => {
    const known = words.get(w)
    if (known !== undefined) return known
    words.set(w, w)
    return w
  }
  return {
    word,
    words: (list: Iterable<string>): ReadonlyArray<string> => Array.from(list, word),
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
    babyFood: record.foodGroup === "Baby Foods" || description.startsWith("babyfood") || description.startsWith("infant formula")
  }
  return {
    food,
    brands: branded ? brands : undefined,
    searchDoc: {
      name: headSegment.join(" "),
      // Asides often give the food's other name: "Soy sauce made from soy (tamari)", "Fish, salmon, chinook, smoked, (lox)".
      description: [...segments.flat(), ...asides].join(" "),
      common: [...names].join(" "),
      langual: descriptionSegments(record.descriptors ?? "").flat().join(" "),
      group: descriptionSegments(record.foodGroup ?? "").flat().join(" ")
    },
    contentTokens: [...contentTokens],
    headTokens: headNouns.filter((t) => !/^[0-9%]+$/.test(t))
  }
}

const mapDefined = <A, B>(a: A | undefined, f: (a: A) => B): B | undefined => (a === undefined ? undefined : f(a))

/** Builds the warm index over every record, search index included (≈ 400 ms for SR28's 8,789 foods). */
export const buildIndex = (records: ReadonlyArray<FoodRecord>): FoodIndex => {
  const shared = sharing()
  const staged = records.map((record) => indexFood(record, shared))
  // A capitalised word is a brand only if no generic record uses it ("Gatorade" is, "Chicken Nuggets" is not).
  const generic = new Set<string>()
  for (const { food, brands } of staged) if (brands === undefined) for (const token of food.tokens) generic.add(token)
  const df = new Map<string, number>()
  for (const { food } of staged) for (const token of food.tokens) df.set(token, (df.get(token) ?? 0) + 1)
  const n = Math.max(1, staged.length)
  const idf = new Map<string, number>()
  for (const [token, count] of df) idf.set(token, Math.log((n + 1) / (count + 0.5)))
  const weigh = (list: ReadonlyArray<string>) => list.reduce((sum, t) => sum + (idf.get(t) ?? 0), 0)
  const foods: Array<IndexedFood> = staged.map(({ food, brands, contentTokens, headTokens }) => {
    if (brands !== undefined) food.brands = new Set(brands.filter((w) => !generic.has(w)))
    food.contentWeight = weigh(contentTokens)
    food.headWeight = weigh(headTokens)
    return food
  })
  // Fields are already normalised and stemmed: the search index splits on spaces and keeps the words as they are.
  const search = new MiniSearch<SearchDoc>({
    fields: SEARCH_FIELDS,
    tokenize: (text) => text.split(" "),
    processTerm: (term) => (term.length > 0 ? term : null),
    searchOptions: { boost: FIELD_BOOST }
  })
  search.addAll(staged.map((food, id) => ({ id, ...food.searchDoc })))
  return { size: foods.length, foods, search, idf, maxIdf: Math.log(n + 1), families: familiesOf(foods), prepared: new Map() }
}

/** Each generic name's family: its ordinary members (no brands, baby foods, diet variants or odd parts), cooked or raw. */
const familiesOf = (foods: ReadonlyArray<IndexedFood>) => {
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
  }
  return out
}

/** The known word closest to a misspelt one, within one edit in four letters ("brocolli" is "broccoli", "farro" is not "taro"). */
const correctSpelling = (index: FoodIndex, word: string): string | undefined => {
  if (word.length < 4) return undefined
  const [best] = index.search.autoSuggest(word, { fuzzy: 0.25, prefix: false, boost: FIELD_BOOST })
  return best?.terms[0]
}

export interface RankedCandidate {
  readonly record: FoodRecord
  readonly score: number
  readonly coverage: number
  readonly headHit: boolean
  /** |ln| of the ratio between the record's energy and the model's guess (smoothed). */
  readonly energyDistance: number
  /** The score's parts, for tuning and for explaining a match. */
  readonly parts: Readonly<Record<"text" | "head" | "extra" | "state" | "prior" | "guess", number>>
}

interface PreparedQuery {
  readonly content: ReadonlyArray<{ readonly alternatives: ReadonlyArray<string>; readonly weight: number }>
  readonly totalWeight: number
  readonly words: ReadonlySet<string>
  readonly states: ReadonlySet<StateWord>
  /** Cooking methods named (boiled, grilled, …), and whether a dry form, a raw state or frying was asked for. */
  readonly methods: ReadonlyArray<StateWord>
  readonly dry: boolean
  readonly raw: boolean
  readonly fried: boolean
  readonly form: string | undefined
  readonly wantsBabyFood: boolean
  readonly wantsDietVariant: boolean
  /** The family a generic name stands for, and whether the query asks for it cooked (undefined: the family's usual form). */
  readonly family: { readonly family: Family; readonly members: ReadonlyArray<FamilyMember>; readonly inForm: (member: FamilyMember) => boolean } | undefined
  /** Whether the head word may give way to the food before it ("celery sticks"): the query has one, and SR28 knows the head word. */
  readonly canBackOff: boolean
  /**
   * The records holding its head word that could be trusted, as far as they are judged without the guess
   * (`assessAll`): retrieved and assessed the first time it is ranked (a generic name's family never needs them).
   */
  assessed?: ReadonlyArray<Assessed>
}

const prepare = (index: FoodIndex, query: string, backOff = false): PreparedQuery => {
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
 * The records that hold the query's head word (its last content word), each with its BM25+ relevance to the whole
 * query over the name, description, other names and food group. A query is read once: the result is kept with it.
 */
const retrieve = (index: FoodIndex, content: ReadonlyArray<{ readonly alternatives: ReadonlyArray<string> }>) => {
  const head = content[content.length - 1]
  if (head === undefined) return []
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
  return hits.map((r) => ({ food: r.id as number, relevance: best > 0 ? r.score / best : 0 }))
}

const prepareAfresh = (index: FoodIndex, query: string, backOff: boolean): PreparedQuery => {
  const terms = joinCompounds(index, queryTerms(query))
  const states = new Set<StateWord>()
  const content: Array<{ alternatives: ReadonlyArray<string>; weight: number }> = []
  const seen = new Set<string>()
  for (const term of terms) {
    const state = term.length === 1 ? stateOf(term[0]!) : undefined
    if (state !== undefined) {
      states.add(state)
      continue
    }
    const alternatives: QueryTerm = term.map((w) => (index.idf.has(w) ? w : (correctSpelling(index, w) ?? w)))
    const key = alternatives.join("|")
    if (seen.has(key)) continue
    seen.add(key)
    const weight = Math.max(...alternatives.map((w) => index.idf.get(w) ?? index.maxIdf))
    content.push({ alternatives, weight })
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

/** A record cooked another way than the query names ("fried" against "roasted"): below any record that fits. */
const CONTRADICTED_METHOD = -0.3
/** A record in a form the query does not name ("Potatoes, mashed" for "roasted potatoes"). */
const FORM_PENALTY = 0.5

const stateScore = (query: PreparedQuery, food: IndexedFood): number => {
  const has = (set: ReadonlySet<StateWord>) => {
    for (const s of food.states) if (set.has(s)) return true
    return false
  }
  let cooking = false
  for (const s of food.states) if (!NOT_COOKING.has(s)) cooking = true
  let score = 0
  const { methods } = query
  // "Bread, cornbread, dry mix, prepared with …" is the prepared food, not the dry mix.
  const dryForm = has(DRY_FORMS) && !food.states.has("cooked")
  if (query.dry) score += dryForm ? 0.5 : -0.5
  else if (dryForm) score -= 1
  if (query.raw) {
    if (has(RAWISH)) score += 0.5
    else if (cooking) score -= 0.7
  }
  if (methods.length > 0) {
    const exact = methods.some((m) => food.states.has(m))
    const equivalent = methods.some((m) => (EQUIVALENT[m] ?? []).some((s) => food.states.has(s)))
    if (exact) score += 0.8
    else if (equivalent) score += 0.5
    // Another cooking method than the one named: "grilled" is not "stewed".
    else if (cooking) score += has(FRIED) && !query.fried ? -0.6 : CONTRADICTED_METHOD
    else if (has(RAWISH)) score -= 1
  } else if (query.states.size === 0) {
    if (food.cookedByDefault && has(RAWISH)) score -= 0.6
    else if (food.cookedByDefault && cooking) score += 0.1
    if (food.states.has("unprepared")) score -= 0.4
    if (food.states.has("toasted")) score -= 0.3
  }
  if (methods.length === 0 && food.fried) score -= 0.3
  for (const [form, penalty] of [["frozen", 0.2], ["canned", 0.4], ["smoked", 0.2]] as const) {
    if (query.states.has(form)) score += food.states.has(form) ? 0.5 : -0.3
    else if (food.states.has(form)) score -= penalty
  }
  if (food.dietVariant && !query.wantsDietVariant) score -= 0.4
  // The form follows the words: "roasted potatoes" are not mashed ones, "mashed potatoes" are.
  if (query.form !== undefined) score += food.form === query.form ? 0.5 : food.form !== undefined ? -0.5 : -0.2
  else if (food.form !== undefined) score -= FORM_PENALTY
  return score
}

/** A branded record fits when the query names its brand ("spam", "cheerios"); otherwise a generic one is preferred. */
const brandScore = (query: PreparedQuery, food: IndexedFood) => {
  if (food.brands === undefined) return 0
  for (const brand of food.brands) if (query.words.has(brand)) return 0.3
  return -1.2
}

/** How much the BM25+ relevance (0 to 1, the best record 1) adds to the share of the query's words a record holds. */
const RELEVANCE_WEIGHT = 0.4

/** Below these a match is not trusted and the item keeps the model's own numbers. */
export const MIN_COVERAGE = 0.6
export const MIN_SCORE = 2

/** How a query is read: whole, or without its last word ("celery sticks" as "celery"); judged with the model's estimate, or without it. */
export interface Reading {
  readonly backOff?: boolean
  readonly ignoreGuess?: boolean
}

/** What a candidate scores whatever the model guessed: every part of its score but the guess's vote. */
interface Assessed {
  readonly food: IndexedFood
  readonly coverage: number
  readonly headHit: boolean
  readonly text: number
  readonly head: number
  readonly extra: number
  readonly state: number
  readonly prior: number
  /** text + head + extra + state + prior. */
  readonly fixed: number
}

/**
 * The candidates of a prepared query that could be trusted whatever the guess (no unwanted baby food, enough of the
 * query's words), assessed once: the guess is all that changes from one request to the next.
 */
const assessAll = (index: FoodIndex, prepared: PreparedQuery): ReadonlyArray<Assessed> => {
  // A trusted match must contain the query's head word, so only records holding it are candidates.
  const headTerm = prepared.content[prepared.content.length - 1]!
  const weighedWords = [...prepared.words].filter((w) => !NEUTRAL.has(w)).map((w) => [w, index.idf.get(w) ?? 0] as const)
  /** Weight of the query's terms the record holds (any alternative of a term counts once). */
  const matchedWeight = (food: IndexedFood) => {
    let matched = 0
    for (const term of prepared.content) {
      for (const w of term.alternatives) {
        if (food.tokens.includes(w)) {
          matched += term.weight
          break
        }
      }
    }
    return matched
  }
  const assessed: Array<Assessed> = []
  for (const candidate of retrieve(index, prepared.content)) {
    const food = index.foods[candidate.food]!
    if (food.babyFood && !prepared.wantsBabyFood) continue
    const matched = matchedWeight(food)
    if (matched < MIN_COVERAGE * prepared.totalWeight) continue
    const coverage = matched / prepared.totalWeight
    let explained = 0
    let headExplained = 0
    for (const [word, idf] of weighedWords) {
      if (!food.tokens.includes(word)) continue
      explained += idf
      if (food.head.includes(word)) headExplained += idf
    }
    const unexplained = Math.max(0, food.contentWeight - explained)
    const headUnexplained = Math.max(0, food.headWeight - headExplained)
    let headHit = false
    for (const w of headTerm.alternatives) if (food.tokens.includes(w)) headHit = true
    let recordHeadHit = false
    for (const w of food.head) if (prepared.words.has(w)) recordHeadHit = true
    const brand = brandScore(prepared, food)
    let specificHit = brand > 0
    if (food.headNoun !== undefined && CLASS_HEADS.has(food.headNoun)) for (const w of headTerm.alternatives) if (food.specific.includes(w)) specificHit = true
    // Another name SR28 gives the food is as good as its own ("kasha" names "Buckwheat groats").
    for (const w of headTerm.alternatives) if (food.names.includes(w)) specificHit = true
    const text = 3 * coverage + RELEVANCE_WEIGHT * candidate.relevance
    // The record names another food unless its head noun, or its specific name, is what the query asks for.
    const nounFits = food.headNoun === undefined || prepared.words.has(food.headNoun) || specificHit
    const head = (headHit ? 0.6 : -0.8) + (recordHeadHit || specificHit ? 0.4 : 0) + (nounFits ? 0 : -0.8)
    const extra = -Math.min(1.5, 0.05 * unexplained) - Math.min(1.2, 0.12 * (specificHit ? Math.max(0, headUnexplained - 4) : headUnexplained))
    const state = stateScore(prepared, food)
    const prior = food.prior + brand + (food.oddPart === undefined || prepared.words.has(food.oddPart) ? 0 : -0.8)
    assessed.push({ food, coverage, headHit, text, head, extra, state, prior, fixed: text + head + extra + state + prior })
  }
  return assessed
}

/** Candidates that could be trusted for a query (head word present, energy and words close enough), best first. */
export const rank = (index: FoodIndex, query: FoodQuery, limit = 5, reading: Reading = {}): ReadonlyArray<RankedCandidate> => {
  const prepared = prepare(index, query.query, reading.backOff === true)
  const judgeByGuess = reading.ignoreGuess !== true
  if (prepared.content.length === 0 || prepared.totalWeight === 0) return []
  prepared.assessed ??= assessAll(index, prepared)
  // Keep only the best few while scanning: no sort and no allocation per candidate.
  const best: Array<{ readonly candidate: Assessed; readonly guess: number; readonly score: number }> = []
  for (const candidate of prepared.assessed) {
    const per100g = candidate.food.record.per100g
    // A record too far from the guess can never be trusted.
    if (judgeByGuess && !isPlausible(per100g, query.guessPer100g)) continue
    const guess = judgeByGuess ? guessScore(per100g, query.guessPer100g) : 0
    const score = candidate.fixed + guess
    if (best.length === limit && score <= best[limit - 1]!.score) continue
    let at = best.length
    while (at > 0 && best[at - 1]!.score < score) at--
    best.splice(at, 0, { candidate, guess, score })
    if (best.length > limit) best.pop()
  }
  return best.map(({ candidate: c, guess, score }) => ({
    record: c.food.record,
    score,
    coverage: c.coverage,
    headHit: c.headHit,
    energyDistance: energyDistance(c.food.record.per100g, query.guessPer100g),
    parts: { text: c.text, head: c.head, extra: c.extra, state: c.state, prior: c.prior, guess }
  }))
}

/** Only plausible records are ranked at all (see plausibility.ts); a trusted one also has the query's head word and enough text evidence. */
export const isTrusted = (candidate: RankedCandidate) => candidate.headHit && candidate.coverage >= MIN_COVERAGE && candidate.score >= MIN_SCORE

export const toMatch = (record: FoodRecord): FoodMatch => ({ fdcId: record.sourceId, name: record.description, per100g: record.per100g })

/**
 * The median of a generic name's family ("nuts", "seafood"), reported with the member nearest it, or undefined when
 * the query names a specific food or too few members fit the guess.
 */
const genericMatch = (index: FoodIndex, query: FoodQuery): FoodMatch | undefined => {
  const { family } = prepare(index, query.query)
  if (family === undefined) return undefined
  const fallback = familyMedian(family.family, family.members, family.inForm, (n) => isPlausible(n, query.guessPer100g))
  if (fallback === undefined) return undefined
  const { representative, median, members } = fallback
  return { fdcId: representative.sourceId, name: `${representative.description} (median of ${members} USDA ${family.family.label} records)`, per100g: median }
}

/** The best trustworthy record for a query (for a generic name, its family's median), or None. */
export const matchIn = (index: FoodIndex, query: FoodQuery): Option.Option<FoodMatch> => {
  const generic = genericMatch(index, query)
  if (generic !== undefined) return Option.some(generic)
  const trusted = rank(index, query, 3).find(isTrusted)
  if (trusted !== undefined) return Option.some(toMatch(trusted.record))
  // With no record of the whole name, the food before its last word stands for it ("celery sticks" are celery, "crab
  // meat" crab) only if that food's usual record, chosen without the estimate, agrees with the estimate on all four
  // values: a last word of form or part leaves the food as it is, a dish's name does not ("chicken curry" is no chicken).
  if (!prepare(index, query.query).canBackOff) return Option.none()
  const usual = rank(index, query, 1, { backOff: true, ignoreGuess: true }).find(isTrusted)
  return usual !== undefined && isClose(usual.record.per100g, query.guessPer100g) ? Option.some(toMatch(usual.record)) : Option.none()
}
