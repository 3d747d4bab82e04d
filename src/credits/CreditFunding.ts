/** The card-credit rail of the analysis Funding seam: identify a Bearer key, reserve one credit, consume it with the result or give it back. */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Metric, Option } from "effect"
import type { BearerCredential, FundingMethod, FundingRail, Reservation, Save, Settled } from "../analysis/Funding.ts"
import { AppConfig, type Settings } from "../config.ts"
import { Conflict, PaymentRequired, type ServiceUnavailable, TooManyRequests, type Unauthorized } from "../domain/errors.ts"
import type { KeyFingerprint } from "../domain/ids.ts"
import { CreditCapacity } from "../limits/Capacity.ts"
import { creditsConsumed } from "../observability/metrics.ts"
import { invalidKey, orStorageUnavailable, orStorageUnavailableFor, paymentsUnavailable, storageUnavailable, supportSentence } from "./failures.ts"
import { KeyFingerprints, payerIdOf } from "./keys.ts"
import { creditsRemaining, Ledger } from "./Ledger.ts"
import { Processor } from "./Processor.ts"

/** The refusals of a key that cannot pay; they name the request when one was started. */
const insufficientCredits = (settings: Settings, requestId?: string) =>
  new PaymentRequired({
    error: {
      code: "insufficient_credits",
      message: `This key has no credits left; buy a pack with POST /v1/credits/checkout${Option.isSome(settings.x402.payTo) ? " or pay per call with x402" : ""}.`,
      ...(requestId === undefined ? {} : { request_id: requestId })
    }
  })

const keyPaused = (settings: Settings, requestId?: string) =>
  new PaymentRequired({
    error: {
      code: "key_paused",
      message: `This key is paused after a refund or dispute, pending support review; nothing was charged.${supportSentence(settings)}`,
      ...(requestId === undefined ? {} : { request_id: requestId })
    }
  })

/** How many known keys an instance remembers before it starts over. */
const KNOWN_KEYS = 10_000

export class CreditFunding extends Context.Tag("morsel/credits/CreditFunding")<
  CreditFunding,
  FundingRail<BearerCredential, Unauthorized | TooManyRequests | ServiceUnavailable>
>() {}

/** An address past its allowance for unknown keys: analyze's 429, a minute's wait. */
const unknownKeysLimited = (message: string) => new TooManyRequests({ error: { code: "rate_limited", message } })

export const CreditFundingLive = Layer.effect(
  CreditFunding,
  Effect.gen(function* () {
    const keys = yield* KeyFingerprints
    const ledger = yield* Ledger
    const processor = yield* Processor
    const settings = yield* AppConfig
    const sql = yield* SqlClient.SqlClient
    const capacity = yield* CreditCapacity

    // An account, once opened, is never removed (paused keys are refused when they reserve): a key seen to exist
    // needs no further read to be identified, so a replay with a known key touches the database once.
    const known = new Set<string>()
    const remember = (fingerprint: KeyFingerprint) => {
      if (known.size >= KNOWN_KEYS) known.clear()
      known.add(fingerprint)
    }

    const unsettled: Settled = { paymentResponse: Option.none() }

    const reservationOf = (requestId: string, reservationId: string): Reservation => {
      const consume = ledger.consume(reservationId).pipe(
        orStorageUnavailable,
        Effect.flatMap((outcome) =>
          outcome === "settled" || outcome === "already_consumed"
            ? Effect.succeed(unsettled)
            : // The credit went back (the attempt outlived its lease): nothing is served unpaid.
              Effect.zipRight(
                Effect.logWarning("commit after release: the credit stays returned", { request_id: requestId }),
                Effect.fail(storageUnavailable(requestId))
              )
        )
      )
      const release = ledger.release(reservationId).pipe(
        Effect.asVoid,
        Effect.catchAll((error) =>
          Effect.logError("credit release failed; the reservation stays held until abandoned", { request_id: requestId, error })
        )
      )
      // Consuming the credit and saving the result are one transaction: never one without the other.
      const settle = (save: Save) =>
        sql.withTransaction(Effect.tap(consume, (settled) => save.complete(settled.paymentResponse))).pipe(
          orStorageUnavailableFor(requestId),
          Effect.tapError(() => release.pipe(Effect.zipRight(save.failed("not_saved")))),
          Effect.tap(() => Metric.increment(creditsConsumed))
        )
      return { settle, release }
    }

    const methodFor = (fingerprint: KeyFingerprint): FundingMethod => ({
      payer: { kind: "credit", id: payerIdOf(fingerprint) },
      ready: ledger.account(fingerprint).pipe(
        orStorageUnavailable,
        Effect.flatMap((account) =>
          Option.isSome(account) && account.value.blocked
            ? Effect.fail(keyPaused(settings))
            : Option.isSome(account) && creditsRemaining(account.value) > 0
              ? Effect.void
              : Effect.fail(insufficientCredits(settings))
        )
      ),
      reserve: (requestId) =>
        ledger.reserve(fingerprint, requestId).pipe(
          Effect.map((held) => reservationOf(requestId, held.reservationId)),
          Effect.catchTags({
            ReserveRefused: (refused) =>
              Effect.fail(refused.reason === "key_paused" ? keyPaused(settings, requestId) : insufficientCredits(settings, requestId)),
            ReservationConflict: () =>
              Effect.fail(
                new Conflict({
                  error: { code: "idempotency_conflict", message: "This request holds a credit of another key.", request_id: requestId }
                })
              )
          }),
          orStorageUnavailable
        ),
      resume: (requestId) =>
        Effect.fail(
          new PaymentRequired({
            error: { code: "payment_required", message: "Credit-funded requests have no pending payment to resume.", request_id: requestId }
          })
        )
    })

    /**
     * A known key of this server's mode → its funding method; anything else → 401 invalid_key. A well-formed key
     * the service does not know first spends its client address's allowance, the one the credit endpoints count
     * (30 a minute): past it, 429 rate_limited. Known keys never touch it.
     */
    const identify = ({ client, key }: BearerCredential): Effect.Effect<FundingMethod, Unauthorized | TooManyRequests | ServiceUnavailable> =>
      Effect.gen(function* () {
        if (!processor.enabled) return yield* Effect.fail(paymentsUnavailable(settings))
        const fingerprint = Option.flatMap(key, keys.fingerprint)
        if (Option.isNone(fingerprint)) return yield* Effect.fail(invalidKey())
        if (known.has(fingerprint.value)) return methodFor(fingerprint.value)
        const account = yield* ledger.account(fingerprint.value)
        if (Option.isNone(account)) {
          yield* Effect.mapError(capacity.admitUnknownKey(keys.digest(`address:${client}`)), (refused) => unknownKeysLimited(refused.error.message))
          return yield* Effect.fail(invalidKey())
        }
        remember(fingerprint.value)
        return methodFor(fingerprint.value)
      }).pipe(orStorageUnavailable)

    /** Returns the credit still held by an attempt whose instance vanished mid-analysis; idempotent. */
    const abandon = (requestId: string): Effect.Effect<void> =>
      ledger.releaseRequest(requestId).pipe(
        Effect.catchAll((error) => Effect.logError("releasing an abandoned credit failed", { request_id: requestId, error }))
      )

    /** Gives back credits left held by analyses that ended without releasing them (see Ledger.releaseOrphans). */
    const releaseOrphans = (olderThan: Date): Effect.Effect<void> =>
      ledger.releaseOrphans(olderThan).pipe(
        Effect.tap((n) => (n > 0 ? Effect.logWarning("returned orphaned credit reservations", { count: n }) : Effect.void)),
        Effect.catchAll((error) => Effect.logError("returning orphaned credit reservations failed", { error }))
      )

    return CreditFunding.of({ identify, abandon, releaseOrphans })
  })
)
