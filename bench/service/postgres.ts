/** The benchmark's databases on a PostgreSQL server: made fresh for a run, dropped after, and their backends' CPU. */
import { Reactivity } from "@effect/experimental"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { cpuMs } from "./load.ts"

const onServer = <A>(serverUrl: string, use: (sql: PgClient.PgClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(
    Effect.scoped(Effect.flatMap(PgClient.make({ url: Redacted.make(serverUrl), maxConnections: 1 }), use)).pipe(Effect.provide(Reactivity.layer))
  )

/** The URL of database `name` on the server of `serverUrl`. */
const urlOf = (serverUrl: string, name: string) => {
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  return url.toString()
}

/** A new, empty database `name` on the server of `serverUrl` (an older one of that name is dropped first). */
export const freshDatabase = async (serverUrl: string, name: string) => {
  await dropDatabase(serverUrl, name)
  await onServer(serverUrl, (sql) => sql.unsafe(`CREATE DATABASE "${name}"`))
  return { name, url: urlOf(serverUrl, name) }
}

export const dropDatabase = (serverUrl: string, name: string) =>
  onServer(serverUrl, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).catch(() => undefined)

/** CPU (ms) of the client backends serving database `name` (a local server only; 0 when unreadable). */
export const postgresCpu = async (serverUrl: string, name: string): Promise<number> => {
  const rows = await onServer(serverUrl, (sql) =>
    sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = ${name} AND backend_type = 'client backend'`
  ).catch(() => [])
  let total = 0
  for (const { pid } of rows) {
    try {
      total += cpuMs(pid)
    } catch {
      // a backend that ended meanwhile, or a server on another machine
    }
  }
  return total
}
