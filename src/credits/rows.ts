/** Queries of the credits tables with their rows decoded: a row that does not decode is a defect of our own schema. */
import { Effect, ParseResult } from "effect"

/**
 * The same query, with a failure to encode its request or decode its rows (a ParseError, our own schema's
 * fault) turned into a defect, so the query keeps the errors of the statement alone (SqlError).
 */
export const decodedOrDie =
  <I extends ReadonlyArray<unknown>, A, E, R>(query: (...args: I) => Effect.Effect<A, E, R>) =>
  (...args: I) =>
    Effect.catchIf(query(...args), (e): e is Extract<E, ParseResult.ParseError> => ParseResult.isParseError(e), Effect.die)
