/** Statements an embedded database runs again and again, parsed and planned once per connection. */
import pg from "pg"

/** Runs of one text after which its connection prepares it: statements run once (migrations, imports) stay unnamed. */
const PREPARE_AFTER_RUNS = 2
/** The most statements one connection keeps prepared. */
const MAX_PREPARED = 64
/** The most texts one connection counts runs of before it starts counting again. */
const MAX_COUNTED = 1_024

type Query = pg.PoolClient["query"]

/**
 * Makes `client` run a parameterised text it has run before as a named statement, which the database parses and
 * plans once (on the embedded database, half of an analysis's claim was parsing and planning its statement). Only
 * for a database that no other process migrates: a prepared `SELECT *` fails once another instance adds a column
 * to its table.
 */
const prepareRepeatedStatements = (client: pg.PoolClient): void => {
  const runs = new Map<string, number>()
  const names = new Map<string, string>()
  const query: Query = client.query.bind(client)
  const nameOf = (text: string): string | undefined => {
    const known = names.get(text)
    if (known !== undefined || names.size >= MAX_PREPARED) return known
    const seen = (runs.get(text) ?? 0) + 1
    if (runs.size >= MAX_COUNTED) runs.clear()
    runs.set(text, seen)
    if (seen < PREPARE_AFTER_RUNS) return undefined
    const name = `morsel_${names.size}`
    names.set(text, name)
    return name
  }
  client.query = ((config: unknown, values?: unknown, callback?: unknown) => {
    const name = typeof config === "string" && Array.isArray(values) && values.length > 0 ? nameOf(config) : undefined
    return name === undefined
      ? (query as (...args: Array<unknown>) => unknown)(config, values, callback)
      : (query as (...args: Array<unknown>) => unknown)({ name, text: config, values }, callback)
  }) as Query
}

/** A pool of `max` connections to the embedded database, each preparing its repeated statements. */
export const embeddedPool = (options: { readonly host: string; readonly port: number; readonly database: string; readonly user: string; readonly max: number }) => {
  const pool = new pg.Pool({ ...options, idleTimeoutMillis: 60_000 })
  pool.on("connect", prepareRepeatedStatements)
  // A connection that fails is taken out of the pool; the statement on it fails on its own.
  pool.on("error", () => {})
  return pool
}
