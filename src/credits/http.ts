/** HTTP handlers of the credits group (balance, checkout, orders, confirm, feedback) and the Bearer key middleware. */
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../config.ts"
import { InvalidRequest } from "../domain/errors.ts"
import { OrderId } from "../domain/ids.ts"
import { listed, sensitiveContent } from "../domain/sensitiveText.ts"
import { CreditKey, CreditKeyAuth, MorselApi } from "../http/Api.ts"
import { makeClientAddress } from "../request/clientAddress.ts"
import { CreditCapacity } from "../limits/Capacity.ts"
import { withRetryAfter } from "../limits/http.ts"
import { Checkout } from "./Checkout.ts"
import { feedbackLimited, invalidKey, orStorageUnavailable, paymentsUnavailable } from "./failures.ts"
import { Feedback } from "./Feedback.ts"
import { KeyFingerprints, parseCreditKey } from "./keys.ts"
import { type Account, creditsRemaining, Ledger, PACK_CREDITS } from "./Ledger.ts"
import { Processor } from "./Processor.ts"

/** The Bearer middleware: a well-formed key of this server's mode passes; whether it is known is the handler's call. */
export const CreditKeyAuthLive = Layer.effect(
  CreditKeyAuth,
  Effect.map(AppConfig, (config) =>
    CreditKeyAuth.of({
      bearer: (token) =>
        Option.isSome(parseCreditKey(Redacted.value(token), config.testMode))
          ? Effect.succeed(Redacted.make(Redacted.value(token)))
          : Effect.fail(invalidKey())
    })
  )
)

export const CreditsHttpLive = HttpApiBuilder.group(MorselApi, "credits", (handlers) =>
  Effect.gen(function* () {
    const keys = yield* KeyFingerprints
    const ledger = yield* Ledger
    const checkout = yield* Checkout
    const feedback = yield* Feedback
    const config = yield* AppConfig
    const processor = yield* Processor
    const capacity = yield* CreditCapacity
    const clientAddress = makeClientAddress(config.trustedProxies)

    const fingerprint = Effect.flatMap(CreditKey, (key) =>
      Option.match(keys.fingerprint(key), { onNone: () => Effect.fail(invalidKey()), onSome: Effect.succeed })
    )

    /** The caller's account; 401 invalid_key until the key's first checkout. */
    const knownAccount = Effect.gen(function* () {
      const fp = yield* fingerprint
      const account = yield* orStorageUnavailable(ledger.account(fp))
      return yield* Option.match(account, { onNone: () => Effect.fail(invalidKey()), onSome: Effect.succeed })
    })

    /**
     * The capacity limit of balance, checkout and confirm, counted before the handler runs. A key that paid counts
     * against its own and the service's minute. A key the service does not know, and one that only opened checkouts
     * (free to open, so as cheap to make as a made-up key), counts only against its client address's minute, so such
     * keys cannot spend what paying keys need. An unknown key then gets 401, unless it is a new buyer's first
     * checkout (`newBuyers`); an unpaid key goes on, to pay and confirm.
     */
    const admitted = (newBuyers: boolean) =>
      Effect.gen(function* () {
        const fp = yield* fingerprint
        const account = yield* orStorageUnavailable(ledger.account(fp))
        const paid = Option.isSome(account) && (yield* orStorageUnavailable(ledger.hasPaid(fp)))
        if (paid) {
          yield* capacity.admit(fp)
          return { fingerprint: fp, account }
        }
        const request = yield* HttpServerRequest.HttpServerRequest
        yield* capacity.admitUnknownKey(keys.digest(`address:${clientAddress(request)}`))
        if (Option.isNone(account) && !newBuyers) return yield* Effect.fail(invalidKey())
        return { fingerprint: fp, account }
      })

    /** A known key's account, admitted against the capacity limit. */
    const admittedAccount = Effect.flatMap(admitted(false), ({ account }) =>
      Option.match(account, { onNone: () => Effect.fail(invalidKey()), onSome: Effect.succeed })
    )

    const balanceOf = (account: Account) => ({
      credits_remaining: creditsRemaining(account),
      blocked: account.blocked,
      test_mode: config.testMode
    })

    // Without a card processor every card-credit endpoint answers 503 payments_unavailable.
    const requirePayments = processor.enabled ? Effect.void : Effect.fail(paymentsUnavailable(config))

    return handlers
      .handle("balance", () =>
        Effect.zipRight(requirePayments, admittedAccount).pipe(Effect.map(balanceOf), withRetryAfter)
      )
      .handle("checkout", ({ payload }) =>
        Effect.gen(function* () {
          yield* requirePayments
          const { fingerprint: fp } = yield* admitted(true)
          const result = yield* checkout.checkout(fp, OrderId.make(payload.order_id), Option.fromNullable(payload.context))
          return result._tag === "Completed"
            ? { order_id: result.orderId, state: result.state, credits: PACK_CREDITS, amount_usd: "5.00" as const }
            : {
                order_id: result.orderId,
                checkout_url: result.checkoutUrl,
                session_id: result.sessionId,
                credits: PACK_CREDITS,
                amount_usd: "5.00" as const
              }
        }).pipe(withRetryAfter)
      )
      .handle("confirm", ({ payload }) =>
        Effect.gen(function* () {
          yield* requirePayments
          const sessionPrefix = config.testMode ? "cs_test_" : "cs_live_"
          if (!payload.session_id.startsWith(sessionPrefix)) {
            return yield* Effect.fail(
              new InvalidRequest({
                error: { code: "wrong_mode", message: `This server accepts ${sessionPrefix} sessions only.` }
              })
            )
          }
          const account = yield* admittedAccount
          yield* checkout.confirm(account.fingerprint, payload.session_id)
          const after = yield* orStorageUnavailable(ledger.account(account.fingerprint))
          return balanceOf(Option.getOrElse(after, () => account))
        }).pipe(withRetryAfter)
      )
      .handle("checkoutStatus", ({ payload }) =>
        Effect.gen(function* () {
          yield* requirePayments
          const account = yield* knownAccount
          const view = yield* checkout.status(account.fingerprint, OrderId.make(payload.order_id))
          const after = yield* orStorageUnavailable(ledger.account(account.fingerprint))
          return {
            order_id: view.orderId,
            state: view.state,
            ...balanceOf(Option.getOrElse(after, () => account)),
            ...Option.match(view.checkoutUrl, { onNone: () => ({}), onSome: (url) => ({ checkout_url: url }) })
          }
        }).pipe(withRetryAfter)
      )
      .handle("feedback", ({ payload }) =>
        Effect.gen(function* () {
          yield* requirePayments
          // Checked here, not in the schema, whose errors would quote the note back.
          const found = sensitiveContent(payload.note)
          if (found.length > 0) {
            return yield* Effect.fail(
              new InvalidRequest({
                error: {
                  code: "invalid_request",
                  message: `note: must not contain keys or personal information; it holds ${listed(found)}. Remove it and send again.`
                }
              })
            )
          }
          const account = yield* knownAccount
          const receipt = yield* feedback
            .submit(account.fingerprint, { requestId: payload.request_id, category: payload.category, note: payload.note })
            .pipe(
              // Retry-After is 60 s for every limit but failure_limit and spend_limited.
              Effect.catchTag("FeedbackLimited", (limited) =>
                Effect.fail(
                  feedbackLimited(
                    limited.scope === "key"
                      ? "This key reached its feedback limit for the past 24 hours; respect Retry-After."
                      : "The service reached its feedback limit for the past 24 hours; respect Retry-After."
                  )
                )
              ),
              orStorageUnavailable
            )
          return { recorded: true as const, duplicate: receipt.duplicate, request_id: payload.request_id }
        }).pipe(withRetryAfter)
      )
  })
)
