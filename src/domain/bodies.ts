/** How large and how deeply nested a request may be, whichever interface carries it (REST body or tool arguments). */
import { InvalidRequest } from "./errors.ts"

/** The largest valid request is a 2,666,668-character image plus a few short fields. */
export const MAX_BODY_BYTES = 2_700_000

/**
 * The deepest nesting of arrays and objects a body may have. Valid bodies are two levels deep; much deeper
 * ones exist only to exhaust the stack of whatever walks them (decoding, error formatting).
 */
export const MAX_JSON_DEPTH = 32

/**
 * The most arrays and objects a body may hold. Valid bodies hold a few dozen (20 nutrition items, a JSON-RPC
 * message); hundreds of thousands (a 2.7 MB body of empty objects) exist only to make its parse hold the server.
 */
export const MAX_JSON_CONTAINERS = 50_000

/** The 400 for a body holding more than MAX_JSON_CONTAINERS arrays and objects. */
export const tooMany = (what: string) =>
  new InvalidRequest({ error: { code: "invalid_request", message: `${what} more than ${MAX_JSON_CONTAINERS} objects and arrays` } })

/** Whether a parsed value (tool arguments) nests deeper than `max`, walked without recursion. */
export const valueNestsDeeperThan = (value: unknown, max: number): boolean => {
  const pending: Array<readonly [unknown, number]> = [[value, 0]]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [current, depth] = next
    if (typeof current !== "object" || current === null) continue
    if (depth + 1 > max) return true
    for (const child of Object.values(current)) pending.push([child, depth + 1])
  }
  return false
}

/** The 400 for a body or arguments nested beyond MAX_JSON_DEPTH. */
export const tooDeep = (what: string) =>
  new InvalidRequest({ error: { code: "invalid_request", message: `${what} nested more than ${MAX_JSON_DEPTH} levels deep` } })
