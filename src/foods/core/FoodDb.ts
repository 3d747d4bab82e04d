/** The seam to the food-composition database: match an English component query to a food record. */
import { Context, type Effect, type Option } from "effect"
import type { Nutrition } from "../../domain/schemas.ts"
import type { FoodRecord } from "./records.ts"

export interface FoodQuery {
  /** English food-database text from the vision model, e.g. "white rice, cooked". */
  readonly query: string
  /** The model's own per-100 g estimate, used as a prior when ranking candidates. */
  readonly guessPer100g: Nutrition
}

export interface FoodMatch {
  /** Record identifier of the source (FDC id, or the SR28 NDB number for SR28 data). */
  readonly fdcId: string
  /** The record's description. */
  readonly name: string
  readonly per100g: Nutrition
}

/** Search, names and lookups over one index, answered at once: a call of many items reads the index once. */
export interface FoodReader {
  readonly search: (text: string, limit: number) => ReadonlyArray<FoodRecord>
  readonly named: (text: string) => FoodRecord | undefined
  /** The records the matcher would trust for a text, best first (at most 25); the first is `named`'s. */
  readonly trusted: (text: string, limit: number) => ReadonlyArray<FoodRecord>
  readonly food: (fdcId: string) => FoodRecord | undefined
}

export class FoodDb extends Context.Tag("morsel/FoodDb")<
  FoodDb,
  {
    /** Changes whenever matching behaviour changes; reported in every result. */
    readonly matcherVersion: string
    /** None when no record is trustworthy enough; the item then keeps the model's numbers. */
    readonly match: (query: FoodQuery) => Effect.Effect<Option.Option<FoodMatch>>
    /** The local foods for a text as a person means it, the plain everyday record first; at most `limit`. */
    readonly search: (text: string, limit: number) => Effect.Effect<ReadonlyArray<FoodRecord>>
    /** The record a text names without any estimate to judge by (a food typed in words), or None. */
    readonly named: (text: string) => Effect.Effect<Option.Option<FoodRecord>>
    /** One local food by its id (`fdc_id` of an analysis item). */
    readonly food: (fdcId: string) => Effect.Effect<Option.Option<FoodRecord>>
    /** The three above over the index of the moment, for reading it many times in one call. */
    readonly reader: Effect.Effect<FoodReader>
  }
>() {}
