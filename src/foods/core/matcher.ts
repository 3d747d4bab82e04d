/** The in-memory matcher: retrieval over what SR28 says of each food (BM25+ with MiniSearch), then re-ranking against the model's guess. */
import { Option } from "effect"
import type { FoodMatch, FoodQuery } from "./FoodDb.ts"
import { familyMedian } from "./generic.ts"
import type { FoodIndex } from "./foodIndex.ts"
import { everydayScore } from "./everyday.ts"
import { energyDistance, guessScore, isClose, isPlausible } from "./plausibility.ts"
import { prepare, retrieve } from "./query.ts"
import type { FoodRecord } from "./records.ts"
import type { StateWord } from "./text.ts"
import { CLASS_HEADS, DRY_FORMS, EQUIVALENT, FRIED, NEUTRAL, NOT_COOKING, RAWISH } from "./vocabulary.ts"
import type { Assessed, IndexedFood, PreparedQuery, RankedCandidate } from "./shapes.ts"

export { buildIndex, type FoodIndex } from "./foodIndex.ts"

/** Reported in every result; bump it whenever ranking, vocabulary or thresholds change. */
export const MATCHER_VERSION = "usda-match-7"


/** A record cooked another way than the query names ("fried" against "roasted"): below any record that fits. */
const CONTRADICTED_METHOD = -0.3
/** A record in a form the query does not name ("Potatoes, mashed" for "roasted potatoes"). */
const FORM_PENALTY = 0.5
/** A record in such a form, when the query names how the food was cooked: another dish, as a fried record is. */
const OTHER_DISH = -0.6

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
    // Another dish made of the food, as a fried one is: "roast potatoes" are not "Potatoes, mashed, ready-to-eat".
    else if (food.form !== undefined && food.form !== query.form) score += OTHER_DISH
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
  /** Order by how plain and everyday a record is too (a text typed by a person: search, nutrition in words); trust is judged as before. */
  readonly everyday?: boolean
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

/** How many of a text's candidates are kept in their everyday order (the most a search answers). */
const EVERYDAY_KEPT = 25

/**
 * Judged by the model's estimate, a record that is another product made of the food (fermented, puffed into cakes,
 * imitation) still ranks below the food itself: a model's guess for "tofu" sits as near fuyu as raw tofu.
 */
const PRODUCT_OF_PENALTY = 0.6

/** Candidates that could be trusted for a query (head word present, energy and words close enough), best first. */
export const rank = (index: FoodIndex, query: FoodQuery, limit = 5, reading: Reading = {}): ReadonlyArray<RankedCandidate> => {
  const prepared = prepare(index, query.query, reading.backOff === true)
  if (prepared.content.length === 0 || prepared.totalWeight === 0) return []
  prepared.assessed ??= assessAll(index, prepared)
  // Read without a guess, a text's order never changes: it is made once and kept with the text.
  if (reading.everyday === true && reading.ignoreGuess === true && limit <= EVERYDAY_KEPT) {
    prepared.everyday ??= bestOf(prepared, prepared.assessed, query, EVERYDAY_KEPT, reading)
    return prepared.everyday.slice(0, limit)
  }
  return bestOf(prepared, prepared.assessed, query, limit, reading)
}

/** The best `limit` of the assessed candidates, in the order of their score (and, read so, how everyday they are). */
const bestOf = (
  prepared: PreparedQuery,
  assessed: ReadonlyArray<Assessed>,
  query: FoodQuery,
  limit: number,
  reading: Reading
): ReadonlyArray<RankedCandidate> => {
  const judgeByGuess = reading.ignoreGuess !== true
  // Keep only the best few while scanning: no sort and no allocation per candidate.
  const best: Array<{ readonly candidate: Assessed; readonly guess: number; readonly score: number; readonly everyday: number; readonly order: number }> = []
  for (const candidate of assessed) {
    const per100g = candidate.food.record.per100g
    // A record too far from the guess can never be trusted.
    if (judgeByGuess && !isPlausible(per100g, query.guessPer100g)) continue
    const guess = judgeByGuess ? guessScore(per100g, query.guessPer100g) : 0
    const score = candidate.fixed + guess
    const everyday = reading.everyday === true ? everydayScore(prepared, candidate.food) : judgeByGuess && candidate.food.productOf ? -PRODUCT_OF_PENALTY : 0
    const order = score + everyday
    if (best.length === limit && order <= best[limit - 1]!.order) continue
    let at = best.length
    while (at > 0 && best[at - 1]!.order < order) at--
    best.splice(at, 0, { candidate, guess, score, everyday, order })
    if (best.length > limit) best.pop()
  }
  return best.map(({ candidate: c, guess, score, everyday }) => ({
    record: c.food.record,
    score,
    coverage: c.coverage,
    headHit: c.headHit,
    energyDistance: energyDistance(c.food.record.per100g, query.guessPer100g),
    parts: { text: c.text, head: c.head, extra: c.extra, state: c.state, prior: c.prior, guess, everyday }
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
  const fallback = familyMedian(family.family, family.members, family.inForm, (n) => isPlausible(n, query.guessPer100g), (n) => -guessScore(n, query.guessPer100g))
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
