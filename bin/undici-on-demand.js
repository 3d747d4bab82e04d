// Stands in for the `undici` package in morsel's bundles. @effect/platform-node's HTTP server imports its undici
// HTTP client, which morsel never uses (its clients use fetch); undici, about 5 MiB of memory once evaluated, is
// loaded from node_modules only if something does use it.
import { createRequire } from "node:module"

const undici = () => createRequire(import.meta.url)("undici")

export class Agent {
  constructor(options) {
    return new (undici().Agent)(options)
  }
}
export const getGlobalDispatcher = () => undici().getGlobalDispatcher()
export default new Proxy({}, { get: (_, name) => undici()[name] })
