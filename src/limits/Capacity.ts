/** Capacity limit of the credit endpoints (429 capacity_limited): per-key and service-wide requests per minute, counted in PostgreSQL. */
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { rowsOf } from "../db/rows.ts"
import { TooManyRequests } from "../domain/errors.ts"
import { fixedWindowStart, MINUTE_MS } from "./window.ts"

/** A window's count after this request, returned only when the request fit in it. */
const counted = rowsOf(Schema.Struct({ requests: Schema.Number }))

export interface CapacitySettings {
  readonly perKeyPerMinute: number
  readonly globalPerMinute: number
  /**
   * Requests with keys the service does not know or that never paid, per client address (they never count against
   * the two above).
   */
  readonly unknownKeysPerAddressPerMinute: number
}

/**
 * A person mistyping a key, or a new buyer's checkout, payment and confirmation, needs a handful a minute; a guessing
 * loop, or keys that open checkouts and never pay, are stopped after this many without touching the capacity that
 * paying keys share.
 */
export const UNKNOWN_KEYS_PER_ADDRESS_PER_MINUTE = 30

export class CreditCapacity extends Context.Tag("morsel/CreditCapacity")<
  CreditCapacity,
  {
    /**
     * Count one credit-endpoint request of a key that paid (`subject`: its keyed fingerprint) against its minute
     * and the service's; refused requests of a key do not count toward the service-wide minute.
     */
    readonly admit: (subject: string) => Effect.Effect<void, TooManyRequests>
    /**
     * Count one request with a key that is unknown or never paid against its client address's minute (`subject`: a
     * keyed digest of the address).
     */
    readonly admitUnknownKey: (subject: string) => Effect.Effect<void, TooManyRequests>
  }
>() {}

/** No capacity limit: for tests of other features. */
export const CreditCapacityUnlimited = Layer.succeed(CreditCapacity, { admit: () => Effect.void, admitUnknownKey: () => Effect.void })

/**
 * Fixed one-minute windows (a burst may reach twice the rate across a minute boundary; fine for a guard).
 * Each count is one conditional upsert, atomic across instances without a lock. The counters' own storage
 * failing lets the request through: the endpoint itself then answers for its storage.
 */
export const CreditCapacityWith = (settings: CapacitySettings): Layer.Layer<CreditCapacity, never, SqlClient.SqlClient> =>
  Layer.effect(
    CreditCapacity,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      /** True when the request fits in `scope`'s window (and was counted), false when the window is full. */
      const count = (scope: string, window: Date, limit: number) =>
        Effect.map(
          counted(sql`
            INSERT INTO capacity_counters (scope, window_start, requests) VALUES (${scope}, ${window}, 1)
            ON CONFLICT (scope, window_start) DO UPDATE SET requests = capacity_counters.requests + 1
            WHERE capacity_counters.requests < ${limit}
            RETURNING requests`),
          (rows) => rows[0]?.requests
        )

      const refuse = (message: string) => new TooManyRequests({ error: { code: "capacity_limited", message } })
      const letThrough = (effect: Effect.Effect<void, TooManyRequests | SqlError.SqlError>) =>
        Effect.catchTag(effect, "SqlError", (error) => Effect.logWarning("capacity counters unavailable; request let through", error))
      const currentWindow = Effect.map(Clock.currentTimeMillis, (nowMs) => new Date(fixedWindowStart(MINUTE_MS, nowMs)))
      /** The first count of a new minute (`counted` is 1) sweeps the finished windows. */
      const sweepIfFirst = (counted: number, window: Date) =>
        counted === 1 ? Effect.asVoid(sql`DELETE FROM capacity_counters WHERE window_start < ${window}`) : Effect.void

      const admit = (subject: string) =>
        Effect.gen(function* () {
          const window = yield* currentWindow
          const perKey = yield* count(`key:${subject}`, window, settings.perKeyPerMinute)
          if (perKey === undefined) {
            return yield* Effect.fail(refuse(`This key made ${settings.perKeyPerMinute} credit requests this minute; respect Retry-After.`))
          }
          const global = yield* count("global", window, settings.globalPerMinute)
          if (global === undefined) {
            return yield* Effect.fail(refuse("The credit endpoints are at capacity this minute; respect Retry-After."))
          }
          yield* sweepIfFirst(global, window)
        }).pipe(letThrough)

      const admitUnknownKey = (subject: string) =>
        Effect.gen(function* () {
          const window = yield* currentWindow
          const limit = settings.unknownKeysPerAddressPerMinute
          const fits = yield* count(`address:${subject}`, window, limit)
          if (fits === undefined) {
            return yield* Effect.fail(
              refuse(
                `This address sent ${limit} requests this minute with keys that are unknown or hold no paid pack; check the key, then respect Retry-After.`
              )
            )
          }
          yield* sweepIfFirst(fits, window)
        }).pipe(letThrough)

      return CreditCapacity.of({ admit, admitUnknownKey })
    })
  )

/** From LIMIT_CREDITS_PER_KEY_PER_MINUTE and LIMIT_CREDITS_GLOBAL_PER_MINUTE (defaults 60 and 600). */
export const CreditCapacityLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ limits }) =>
    CreditCapacityWith({
      perKeyPerMinute: limits.creditsPerKeyPerMinute,
      globalPerMinute: limits.creditsGlobalPerMinute,
      unknownKeysPerAddressPerMinute: UNKNOWN_KEYS_PER_ADDRESS_PER_MINUTE
    })
  )
)
