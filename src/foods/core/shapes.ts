/** The shapes the matcher's modules share (a food as indexed, a query as prepared, a candidate as judged and ranked), apart from the code that makes them. */
import type { Family, FamilyMember } from "./generic.ts"
import type { FoodRecord } from "./records.ts"
import type { StateWord } from "./text.ts"

/**
 * A food as the matcher reads it. Its word lists are arrays of shared strings, and foods with the same states share
 * one set: 8,789 foods of small Sets and separate copies of "chicken" held about twice the memory.
 */
export interface IndexedFood {
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
  /** The search-only part of how plain and everyday the record is (everyday.ts). */
  readonly everyday: number
  /** Another product made of the food ("Tofu, salted and fermented (fuyu)", "Rice cakes"), not the food. */
  readonly productOf: boolean
  /** Eaten cooked as a rule, but SR28 lists the food cooked only fried ("Tofu, fried"): raw is its usual record. */
  readonly rawIsUsual: boolean
}

export interface PreparedQuery {
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
  /** Its best candidates in their everyday order (search and nutrition in words, no guess): made the first time asked. */
  everyday?: ReadonlyArray<RankedCandidate>
}

/** What a candidate scores whatever the model guessed: every part of its score but the guess's vote. */
export interface Assessed {
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

export interface RankedCandidate {
  readonly record: FoodRecord
  readonly score: number
  readonly coverage: number
  readonly headHit: boolean
  /** |ln| of the ratio between the record's energy and the model's guess (smoothed). */
  readonly energyDistance: number
  /** The score's parts, for tuning and for explaining a match. */
  readonly parts: Readonly<Record<"text" | "head" | "extra" | "state" | "prior" | "guess" | "everyday", number>>
}
