/** Rows read back from our own tables, decoded with the schema of their columns instead of being taken on trust. */
import { Effect, Schema } from "effect"

/**
 * Decodes every row a query returns with `row` (int8 columns arrive as strings, timestamps as Dates). Build it
 * once per row shape, at module level. A row that does not decode is a fault of our own schema: a defect, never
 * an error the caller must handle.
 */
export const rowsOf = <A, I>(row: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(Schema.Array(row))
  return <E, R>(query: Effect.Effect<ReadonlyArray<unknown>, E, R>): Effect.Effect<ReadonlyArray<A>, E, R> =>
    Effect.flatMap(query, (rows) => Effect.orDie(decode(rows)))
}

/** The answer of `SELECT count(*)::int AS n …` (cast to int4, so a number). */
export const countRows = rowsOf(Schema.Struct({ n: Schema.Number }))
