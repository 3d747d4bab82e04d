/** Shared pieces of the credits tests: the fake processor as a layer, the services on a test database, a ledger audit. */
import { createServer } from "node:http"
import { HttpApi, HttpLayerRouter, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Either, Layer, Logger, LogLevel, Option, Redacted, TestClock } from "effect"
import { type AppConfig, AppConfigFromEnv } from "../../src/config.ts"
import { Checkout, type CheckoutResult } from "../../src/credits/Checkout.ts"
import { CreditsApiLive, CreditsServicesLive } from "../../src/credits/layer.ts"
import { Ledger } from "../../src/credits/Ledger.ts"
import { KeyFingerprints, newCreditKey } from "../../src/credits/keys.ts"
import { CreditsRoutes } from "../../src/credits/routes.ts"
import { type KeyFingerprint, OrderId } from "../../src/domain/ids.ts"
import { CreditsGroup } from "../../src/http/Api.ts"
import { TestDatabase } from "../support/database.ts"
import { type FakeStripe, startFakeStripe } from "../support/fakeStripe.ts"
import { isRecord, send } from "../support/http.ts"

export class Fake extends Context.Tag("test/FakeStripe")<Fake, FakeStripe>() {}

export const FakeStripeLive = Layer.scoped(
  Fake,
  Effect.acquireRelease(
    Effect.promise(() => startFakeStripe()),
    (fake) => Effect.promise(() => fake.close())
  )
)

export const PUBLIC_BASE_URL = "http://127.0.0.1:8787"

/** The credits services on a fresh test database, talking to a fresh fake Stripe (test mode). */
export const creditsWithFake = (env: Readonly<Record<string, string>> = {}) =>
  Layer.unwrapEffect(
    Effect.map(Fake, (fake) =>
      CreditsServicesLive.pipe(
        Layer.provideMerge(TestDatabase),
        Layer.provideMerge(AppConfigFromEnv({ PUBLIC_BASE_URL, LOG_LEVEL: "warning", ...fake.env, ...env })),
        Layer.orDie
      )
    )
  ).pipe(Layer.provideMerge(FakeStripeLive))

/** The credits services without any card processor configured. */
export const creditsWithoutStripe = (env: Readonly<Record<string, string>> = {}) =>
  CreditsServicesLive.pipe(
    Layer.provideMerge(TestDatabase),
    Layer.provideMerge(AppConfigFromEnv({ PUBLIC_BASE_URL, ...env })),
    Layer.orDie
  )

export const sessionOf = (result: CheckoutResult) => {
  if (result._tag !== "Session") throw new Error(`expected a session, got ${JSON.stringify(result)}`)
  return result
}

/** The error code an effect fails with, or "succeeded". */
export const errorCodeOf = <A, E extends { readonly error: { readonly code: string } }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), (r) => (Either.isLeft(r) ? r.left.error.code : "succeeded"))

/** The state checkout-status answers for the order. */
export const stateOf = (fingerprint: KeyFingerprint, orderId: OrderId) =>
  Effect.flatMap(Checkout, (c) => c.status(fingerprint, orderId)).pipe(Effect.map((v) => v.state))

/** The key's available credits (below zero after a reversal of spent credits). */
export const available = (fingerprint: KeyFingerprint) =>
  Effect.flatMap(Ledger, (l) => l.account(fingerprint)).pipe(Effect.map((a) => Option.getOrThrow(a).available))

/** Pins the test clock and the fake Stripe's clock to the same instant. */
export const pinClocks = Effect.gen(function* () {
  const fake = yield* Fake
  const start = Date.now()
  yield* TestClock.setTime(start)
  fake.setNow(Math.floor(start / 1000))
  return start
})

/** A fresh test-mode key and its fingerprint. */
export const freshKey = Effect.gen(function* () {
  const keys = yield* KeyFingerprints
  const key = newCreditKey(keys.testMode)
  const fingerprint = Option.getOrThrow(keys.fingerprint(Redacted.make(key)))
  return { key, fingerprint }
})

/** Same API id as MorselApi, only the credits group: the group layer of src/credits serves it unchanged. */
const CreditsOnlyApi = HttpApi.make("morsel").add(CreditsGroup)

export class CreditsServer extends Context.Tag("test/CreditsServer")<CreditsServer, { readonly url: string }>() {}

/** The credits HTTP surface (API group and webhook, plus `extra` routes) on a random 127.0.0.1 port. */
export const creditsServerWith = <E, R>(extra: Layer.Layer<never, E, R>) =>
  Layer.scoped(
    CreditsServer,
    Effect.gen(function* () {
      const routes = Layer.mergeAll(
        HttpLayerRouter.addHttpApi(CreditsOnlyApi).pipe(Layer.provide(CreditsApiLive)),
        CreditsRoutes,
        extra
      )
      const services = yield* Effect.context<
        Exclude<R, HttpLayerRouter.HttpRouter> | Layer.Layer.Success<typeof CreditsServicesLive> | AppConfig | SqlClient.SqlClient
      >()
      const app = HttpLayerRouter.serve(routes, { disableListenLog: true, disableLogger: true }).pipe(
        Layer.provide(Layer.succeedContext(services)),
        Layer.provideMerge(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 }).pipe(Layer.orDie)),
        Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)),
        Layer.orDie
      )
      const context = yield* Layer.build(app)
      const address = Context.get(context, HttpServer.HttpServer).address
      if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("not a TCP server")
      return { url: `http://127.0.0.1:${address.port}` }
    })
  )

export const CreditsServerLive = creditsServerWith(Layer.empty)

/** A request to the credits server with a Bearer key, and a JSON body when one is given. */
export const api = (path: string, key: string, body?: unknown) =>
  Effect.gen(function* () {
    const { url } = yield* CreditsServer
    return yield* Effect.promise(() =>
      send(`${url}${path}`, { headers: { authorization: `Bearer ${key}` }, ...(body === undefined ? {} : { body }) })
    )
  })

/** A Stripe event signed by the fake and delivered to the credits server's webhook. */
export const webhook = (payload: Parameters<FakeStripe["sendWebhook"]>[1], options?: { secret?: string }) =>
  Effect.gen(function* () {
    const fake = yield* Fake
    const { url } = yield* CreditsServer
    return yield* Effect.promise(() => fake.sendWebhook(`${url}/webhooks/stripe`, payload, options))
  })

/** The balance object of a key, as the server answers it. */
export const balanceOf = (key: string) => Effect.map(api("/v1/credits/balance", key), (a) => a.body)

/** A known key with an open checkout: returns the key, its fingerprint, the order and the session. */
export const buyer = Effect.gen(function* () {
  const { key, fingerprint } = yield* freshKey
  const orderId = crypto.randomUUID()
  const answer = yield* api("/v1/credits/checkout", key, { order_id: orderId })
  const body = answer.body
  if (answer.status !== 200 || !isRecord(body) || typeof body["session_id"] !== "string") throw new Error(`checkout failed: ${answer.text}`)
  return { key, fingerprint, orderId, sessionId: body["session_id"] }
})

export interface Violation {
  readonly rule: string
  readonly detail: unknown
}

/** Every ledger invariant of src/credits/Ledger.ts, checked against the stored rows; [] when all hold. */
export const auditLedger = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const violations: Array<Violation> = []
  const check = (rule: string, rows: ReadonlyArray<unknown>) => {
    for (const detail of rows) violations.push({ rule, detail })
  }
  check(
    "balance equals the sums of its entries",
    yield* sql`
      SELECT a.fingerprint, a.available, a.reserved, e.av, e.re FROM credit_accounts a
      LEFT JOIN (SELECT fingerprint, sum(available_delta)::int AS av, sum(reserved_delta)::int AS re
                 FROM credit_entries GROUP BY fingerprint) e USING (fingerprint)
      WHERE a.available <> coalesce(e.av, 0) OR a.reserved <> coalesce(e.re, 0)`
  )
  check(
    "reserved equals the held reservations",
    yield* sql`
      SELECT a.fingerprint FROM credit_accounts a
      WHERE a.reserved <> (SELECT count(*) FROM credit_reservations r WHERE r.fingerprint = a.fingerprint AND r.state = 'held')`
  )
  check("an unblocked key is never overdrawn", yield* sql`SELECT fingerprint FROM credit_accounts WHERE NOT blocked AND available < 0`)
  check(
    "one settlement per settled reservation, none for a held one",
    yield* sql`
      SELECT r.reservation_id, r.state, count(e.entry_id) AS n FROM credit_reservations r
      LEFT JOIN credit_entries e ON e.reservation_id = r.reservation_id AND e.kind IN ('consume', 'release')
      GROUP BY r.reservation_id, r.state
      HAVING count(e.entry_id) <> CASE WHEN r.state = 'held' THEN 0 ELSE 1 END`
  )
  check(
    "settlement matches the reservation state",
    yield* sql`
      SELECT r.reservation_id FROM credit_reservations r JOIN credit_entries e ON e.reservation_id = r.reservation_id
      WHERE (e.kind = 'consume' AND r.state <> 'consumed') OR (e.kind = 'release' AND r.state <> 'released')`
  )
  check(
    "every reservation has its reserve entry",
    yield* sql`
      SELECT r.reservation_id FROM credit_reservations r
      WHERE NOT EXISTS (SELECT 1 FROM credit_entries e WHERE e.reservation_id = r.reservation_id AND e.kind = 'reserve')`
  )
  check(
    "a reversal follows a grant",
    yield* sql`
      SELECT e.order_id FROM credit_entries e WHERE e.kind = 'reversal'
      AND NOT EXISTS (SELECT 1 FROM credit_entries g WHERE g.order_id = e.order_id AND g.kind = 'grant')`
  )
  check(
    "an order's reversals and restorations alternate, numbered 1, 2, …",
    yield* sql`
      SELECT order_id FROM credit_entries WHERE kind IN ('reversal', 'restoration') GROUP BY order_id
      HAVING count(*) FILTER (WHERE kind = 'reversal') - count(*) FILTER (WHERE kind = 'restoration') NOT IN (0, 1)
          OR max(cycle) FILTER (WHERE kind = 'reversal') <> count(*) FILTER (WHERE kind = 'reversal')
          OR coalesce(max(cycle) FILTER (WHERE kind = 'restoration'), 0) <> count(*) FILTER (WHERE kind = 'restoration')`
  )
  check(
    "order state agrees with its entries",
    yield* sql`
      SELECT o.order_id, o.state FROM credit_orders o
      LEFT JOIN (SELECT order_id, count(*) FILTER (WHERE kind = 'grant') AS grants,
                        count(*) FILTER (WHERE kind = 'reversal') - count(*) FILTER (WHERE kind = 'restoration') AS open
                 FROM credit_entries WHERE order_id IS NOT NULL GROUP BY order_id) e USING (order_id)
      WHERE (o.state = 'paid') <> (coalesce(e.grants, 0) = 1 AND coalesce(e.open, 0) = 0)
         OR (o.state = 'reversed') <> (coalesce(e.open, 0) = 1)`
  )
  check(
    "an order is reversed exactly while one of its refunds or disputes takes the money back",
    yield* sql`
      SELECT o.order_id, o.state FROM credit_orders o
      WHERE EXISTS (SELECT 1 FROM credit_reversal_causes c WHERE c.order_id = o.order_id)
        AND (o.state = 'reversed') <> EXISTS (SELECT 1 FROM credit_reversal_causes c WHERE c.order_id = o.order_id AND c.reverses)`
  )
  check(
    "a reversed order's key is blocked",
    yield* sql`
      SELECT o.order_id FROM credit_orders o JOIN credit_accounts a USING (fingerprint)
      WHERE o.state = 'reversed' AND NOT a.blocked`
  )
  return violations
})

/** Inserts a pending order row directly (ledger-only tests that do not go through checkout). */
/** A new order id, as a client chooses one (a UUID v4). */
export const newOrderId = () => OrderId.make(crypto.randomUUID())

export const seedOrder = (fingerprint: string, orderId: OrderId = newOrderId()) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const at = new Date()
    yield* sql`
      INSERT INTO credit_accounts (fingerprint, created_at, updated_at) VALUES (${fingerprint}, ${at}, ${at})
      ON CONFLICT (fingerprint) DO NOTHING`
    yield* sql`
      UPDATE credit_orders SET state = 'expired' WHERE fingerprint = ${fingerprint} AND state = 'pending'`
    yield* sql`
      INSERT INTO credit_orders (order_id, fingerprint, state, session_params, created_at, last_attempt_at, updated_at)
      VALUES (${orderId}, ${fingerprint}, 'pending', '{}'::jsonb, ${at}, ${at}, ${at})`
    return orderId
  })

/** A finished analysis request of a payer, as the analysis pipeline stores it. */
export const seedAnalysisRequest = (input: {
  readonly payer: string
  readonly status: "paid" | "failed" | "running"
  readonly createdAt: Date
  readonly requestId?: string
}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const requestId = input.requestId ?? crypto.randomUUID()
    yield* sql`
      INSERT INTO analysis_requests
        (request_id, payer, idempotency_key, input_fingerprint, funding, status, lease_until, created_at, completed_at)
      VALUES (${requestId}, ${input.payer}, ${`idem-${requestId}`}, 'fp', 'credit', ${input.status},
              ${input.createdAt}, ${input.createdAt}, ${input.status === "running" ? null : input.createdAt})`
    return requestId
  })
