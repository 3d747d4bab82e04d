// The silence watch on database sockets: a statement the server never answers fails in time, and the transaction it was in dies on the server, uncommitted.
import { randomBytes } from "node:crypto"
import { Reactivity } from "@effect/experimental"
import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { silenceLimitedSocket } from "../../src/db/silence.ts"
import { query, realPostgresUrl } from "../support/database.ts"
import { type PgProxy, startPgProxy } from "../support/pgProxy.ts"

if (!realPostgresUrl) console.warn("test/db/silence: skipped (set TEST_DATABASE_URL: the proxy needs a PostgreSQL server on TCP)")

describe.skipIf(!realPostgresUrl)("sockets that give up on a silent database", () => {
  const admin = realPostgresUrl ?? ""
  const schema = `t_${randomBytes(6).toString("hex")}`
  let direct = ""
  let proxy: PgProxy

  beforeAll(async () => {
    const u = new URL(admin)
    u.searchParams.set("options", `-c search_path=${schema}`)
    direct = u.toString()
    await query(admin, `CREATE SCHEMA ${schema}`)
    await query(direct, "CREATE TABLE counter (n integer NOT NULL)")
    await query(direct, "INSERT INTO counter VALUES (0)")
    proxy = await startPgProxy(direct)
  })
  afterAll(async () => {
    await proxy?.close()
    await query(admin, `DROP SCHEMA ${schema} CASCADE`)
  })

  it("a stalled statement fails after the limit, its transaction is not committed when the network returns, and the pool serves again", async () => {
    const limitMs = 1_000
    const outcome = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const sql = yield* PgClient.make({
            url: Redacted.make(proxy.url(direct)),
            maxConnections: 2,
            stream: silenceLimitedSocket(limitMs),
            connectTimeout: "2 seconds"
          })
          const started = Date.now()
          // The rollback on the dropped connection fails too, and @effect/sql makes that a defect: an exit, not an Either.
          const failed = yield* Effect.exit(
            sql.withTransaction(
              Effect.gen(function* () {
                yield* sql`UPDATE counter SET n = n + 1`
                proxy.stall()
                yield* sql`SELECT 1`
              })
            )
          )
          const tookMs = Date.now() - started
          proxy.pass()
          // Once the network is back, the statement stuck in the proxy reaches the server on a connection that is gone.
          yield* Effect.sleep("500 millis")
          const after = yield* sql<{ n: number }>`SELECT n FROM counter`
          return { failed, tookMs, after }
        })
      ).pipe(Effect.provide(Reactivity.layer))
    )
    expect(Exit.isFailure(outcome.failed)).toBe(true)
    expect(outcome.tookMs).toBeGreaterThanOrEqual(limitMs)
    expect(outcome.tookMs).toBeLessThan(limitMs + 3_000)
    expect(outcome.after).toEqual([{ n: 0 }])
    const open = await query<{ n: string }>(admin, "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND query LIKE '%counter%'")
    expect(open[0]?.n).toBe("0")
  })
})
