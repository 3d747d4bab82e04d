/** Per-call x402 funding of an analysis: challenge, verification before work, single-use claims, settlement after validation. */
import type { SqlClient } from "@effect/sql"
import { encodePaymentSignatureHeader } from "@x402/core/http"
import type { PaymentRequirements } from "@x402/core/types"
import { Clock, ConfigError, Context, Effect, Layer, Option } from "effect"
import { type Address, getAddress, isAddressEqual } from "viem"
import type { FundingMethod, FundingRail, PaymentCredential, PriceChallenge, Reservation, Save, Settled } from "../analysis/Funding.ts"
import { AppConfig } from "../config.ts"
import { Processor } from "../credits/Processor.ts"
import { Conflict, PaymentRequired, ServiceUnavailable } from "../domain/errors.ts"
import { PayerId, type RequestId } from "../domain/ids.ts"
import { count, outcomeOf, x402Settlements } from "../observability/metrics.ts"
import { EvmChain, EvmChainLive } from "./EvmChain.ts"
import { type Outcome, Payments, PaymentsLive } from "./Payments.ts"
import { PaymentStore, PaymentStoreLive } from "./PaymentStore.ts"
import { explain } from "./reasons.ts"
import {
  authorizationDigest,
  authorizationSigner,
  challengeFailure,
  failedResponse,
  type DecodedPayment,
  MAX_TIMEOUT_SECONDS,
  NETWORK,
  pendingResponse,
  readPayment,
  receipt,
  requirements,
  setPaymentResponse,
  setRetryAfter,
  type Terms,
  unavailable
} from "./protocol.ts"
import { type ReconcilerOptions, type X402Reconciler, X402ReconcilerDisabled, X402ReconcilerLive } from "./Reconciler.ts"
import { type Settlement, SettlementFacilitator, SettlementSelf } from "./Settlement.ts"
import { Verifier, VerifierFacilitator, VerifierLocal } from "./Verifier.ts"

/** Blocks before the head at verification from which a spend of the authorization is searched (RPC nodes may lag). */
const CLAIM_BLOCK_MARGIN = 100n

/** Clock skew a payer's validBefore may have beyond the challenge's maxTimeoutSeconds. */
const VALIDITY_MARGIN_SECONDS = 60

/** A pending payment is retried after 60 seconds. */
export const PENDING_RETRY_AFTER_SECONDS = 60

/**
 * The x402 rail of the analysis Funding seam. `identify` proves the payment's signer (an undecodable payment is a
 * 402 `invalid_payment` with a fresh challenge); `challenge` is the 402 price challenge (body and PAYMENT-REQUIRED
 * header), or `x402_unavailable` when x402 is off; `abandon` gives back the claim of an attempt that vanished, a
 * submitted payment being left to reconciliation.
 */
export class X402Funding extends Context.Tag("morsel/x402/X402Funding")<
  X402Funding,
  FundingRail<PaymentCredential, PaymentRequired | ServiceUnavailable> &
    PriceChallenge & {
      /** Whether x402 is on (X402_PAY_TO set). */
      readonly enabled: boolean
    }
>() {}

const toSettled = (outcome: Outcome & { readonly _tag: "Settled" }): Settled => ({ paymentResponse: Option.some(outcome.paymentResponse) })

/** Counts a settlement attempt: `settled`, `payment_pending` or the code of its failure. */
const settlement = <A, E extends { readonly error: { readonly code: string } }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.onExit(effect, (exit) => count(x402Settlements, { outcome: outcomeOf(exit, "settled") }))

const isPending = (error: PaymentRequired | ServiceUnavailable) => error._tag === "ServiceUnavailable" && error.error.code === "payment_pending"

/** Saves the outcome of a settlement: the result as paid, or a payment that can no longer happen as failed. */
const saved = (save: Save) => (settling: Effect.Effect<Settled, PaymentRequired | ServiceUnavailable>) =>
  settling.pipe(
    settlement,
    Effect.tapError((error) => (error._tag === "PaymentRequired" ? save.failed("payment_failed") : Effect.void)),
    Effect.tap((settled) => save.complete(settled.paymentResponse))
  )

/** A claimed authorization: a Reservation that can also be submitted alone, for a request whose result is saved already. */
interface Claimed extends Reservation {
  readonly submit: Effect.Effect<Settled, PaymentRequired | ServiceUnavailable>
}

/** x402 off; its refusals name card credits as the way to pay only when this server sells them. */
const disabled = (cardCredits: boolean): Context.Tag.Service<X402Funding> => ({
  enabled: false,
  identify: () => unavailable(cardCredits),
  challenge: unavailable(cardCredits),
  challengeWith: (code, message) => Effect.fail(new PaymentRequired({ error: { code, message } })),
  abandon: () => Effect.void,
  releaseOrphans: () => Effect.void
})

export const X402FundingLive = Layer.effect(
  X402Funding,
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const store = yield* PaymentStore
    const payments = yield* Payments
    const verifier = yield* Verifier
    const chain = yield* EvmChain
    const payTo = yield* Option.match(settings.x402.payTo, {
      onNone: () => Effect.dieMessage("X402FundingLive needs X402_PAY_TO"),
      onSome: Effect.succeed
    })
    const terms: Terms = { payTo, asset: settings.x402.asset, publicBaseUrl: settings.publicBaseUrl }
    const accepted: PaymentRequirements = requirements(terms)
    const asset: Address = getAddress(settings.x402.asset)

    const invalid = (message: string) => challengeFailure(terms, "invalid_payment", message)
    const minimumValiditySeconds = Math.ceil((settings.analysisTimeoutMs + settings.x402.confirmTimeoutMs) / 1000) + 30
    const maximumValiditySeconds = MAX_TIMEOUT_SECONDS + VALIDITY_MARGIN_SECONDS

    const unavailableNow = (what: string, requestId?: RequestId): Effect.Effect<never, ServiceUnavailable> =>
      setRetryAfter(5).pipe(
        Effect.zipRight(
          Effect.fail(
            new ServiceUnavailable({
              error: {
                code: "payments_unavailable",
                message: `${what}; nothing was charged, retry the same request shortly`,
                ...(requestId ? { request_id: requestId } : {})
              }
            })
          )
        )
      )

    // The failed receipt travels with the new challenge (x402's MCP transport shows it beside the PaymentRequired).
    const failedBefore = (reason: string, payer: string) =>
      challengeFailure(
        terms,
        "invalid_payment",
        `the payment could not be settled: ${explain(reason)}; nothing was charged and nothing is served, sign a new payment`,
        failedResponse(reason, payer)
      )

    const settledOrFail =
      (requestId: RequestId, payment: DecodedPayment) =>
      (outcome: Outcome): Effect.Effect<Settled, PaymentRequired | ServiceUnavailable> => {
      switch (outcome._tag) {
        case "Settled":
          return Effect.succeed(toSettled(outcome))
        case "Failed":
          return failedBefore(outcome.reason, payment.payer)
        case "Pending": {
          const pendingReceipt = pendingResponse(outcome.txHash, payment.payer)
          return setRetryAfter(PENDING_RETRY_AFTER_SECONDS).pipe(
            Effect.zipRight(setPaymentResponse(receipt(pendingReceipt))),
            Effect.zipRight(
              Effect.fail(
                new ServiceUnavailable({
                  error: {
                    code: "payment_pending",
                    message:
                      "The result is saved and the payment is being confirmed on chain. Retry the same request (same image, Idempotency-Key and PAYMENT-SIGNATURE) after 60 seconds; do not sign a new payment.",
                    request_id: requestId
                  },
                  payment_response: pendingReceipt
                })
              )
            )
          )
        }
      }
    }

    const reservationFor = (requestId: RequestId, payment: DecodedPayment): Claimed => {
      const submit = payments
        .settle(requestId, payment)
        .pipe(Effect.flatMap(settledOrFail(requestId, payment)), Effect.annotateLogs({ request_id: requestId, payer: payment.payer }))
      const release = store.release(requestId).pipe(
        Effect.tap((removed) => (removed ? Effect.logInfo("x402 claim released; nothing was submitted") : Effect.void)),
        Effect.catchAll((e) => Effect.logWarning("x402 claim release failed", e.message)),
        Effect.asVoid
      )
      const settle = (save: Save) =>
        Effect.gen(function* () {
          // A payment is saved as pending before it is submitted, so no paid result is ever lost.
          yield* save.pending.pipe(Effect.tapError(() => release))
          // A payment still pending on chain keeps its claim and its saved result: the retry or the reconciler finishes it.
          const settled = yield* submit.pipe(
            settlement,
            Effect.tapError((error) => (isPending(error) ? Effect.void : release.pipe(Effect.zipRight(save.failed(error.error.code)))))
          )
          yield* save.complete(settled.paymentResponse)
          return settled
        })
      return { settle, release, submit }
    }

    const validTooLong = invalid(
      `the authorization is valid for too long: validBefore may be at most ${maximumValiditySeconds} seconds ahead (the challenge's maxTimeoutSeconds of ${MAX_TIMEOUT_SECONDS} plus ${VALIDITY_MARGIN_SECONDS}); sign it with the challenge's maxTimeoutSeconds`
    )
    const expiresTooSoon = invalid(
      `the authorization expires too soon: it must stay valid for at least ${minimumValiditySeconds} seconds (sign it with the challenge's maxTimeoutSeconds)`
    )
    const contractWallet = invalid("smart-contract wallets are not supported; pay from an externally owned account")

    /** Whether the chain would take the payment now, claiming nothing: what `reserve` checks that needs no request. */
    const ready = (payment: DecodedPayment) =>
      Effect.gen(function* () {
        const nowSeconds = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        const validBefore = BigInt(payment.authorization.validBefore)
        if (validBefore > BigInt(nowSeconds + maximumValiditySeconds)) return yield* validTooLong
        if (validBefore < BigInt(nowSeconds + minimumValiditySeconds)) return yield* expiresTooSoon
        const isContract = yield* chain.hasCode(payment.authorization.from).pipe(Effect.catchAll(() => unavailableNow("the payment chain cannot be reached")))
        if (isContract) return yield* contractWallet
        const verdict = yield* verifier.verify(payment.payload, accepted).pipe(
          Effect.catchAll(() => unavailableNow("the payment cannot be verified right now"))
        )
        if (!verdict.isValid) return yield* invalid(`the payment is not valid: ${explain(verdict.invalidReason ?? "invalid_payment")}`)
      })

    const reserve = (payment: DecodedPayment) => (requestId: RequestId) =>
      Effect.gen(function* () {
        const digest = authorizationDigest(asset, payment.authorization)
        const nonce = payment.authorization.nonce
        const reused = () =>
          new Conflict({
            error: {
              code: "authorization_reused",
              message: "This payment authorization already pays for another request; sign a new payment for a new Idempotency-Key",
              request_id: requestId
            }
          })
        // An authorization valid for longer than the challenge offers is refused before anything is looked up or stored.
        const nowSeconds = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        if (BigInt(payment.authorization.validBefore) > BigInt(nowSeconds + maximumValiditySeconds)) return yield* validTooLong
        const records = <A, E, R>(self: Effect.Effect<A, E, R>) =>
          self.pipe(Effect.catchAll(() => unavailableNow("payment records are unavailable", requestId)))
        const holder = yield* records(store.holder(asset.toLowerCase(), payment.payer, nonce))
        if (Option.isSome(holder) && holder.value !== requestId) {
          const other = yield* records(store.get(holder.value))
          // The payment of an earlier attempt can no longer happen: nothing was charged, a new payment is needed.
          if (Option.isSome(other) && other.value.state === "failed") {
            return yield* failedBefore(Option.getOrElse(other.value.failureReason, () => "the payment failed"), payment.payer)
          }
          // A claim left behind by a failed attempt (its release failed) holds nothing: give it back and claim here.
          const freed = yield* records(store.releaseAbandoned(holder))
          if (freed.length === 0) return yield* Effect.fail(reused())
        }
        if (Option.isSome(holder)) {
          // This request already holds the authorization; past its submission the chain, not a new check, decides.
          const held = yield* records(store.get(requestId))
          if (Option.isSome(held) && held.value.digest === digest && held.value.state !== "claimed") return reservationFor(requestId, payment)
        }
        // Externally owned wallets only. The head is read before verification: no spend the
        // verification did not see can be older, so the search for one starts there.
        const { isContract, head } = yield* Effect.all(
          { isContract: chain.hasCode(payment.authorization.from), head: chain.latestBlock },
          { concurrency: 2 }
        ).pipe(Effect.catchAll(() => unavailableNow("the payment chain cannot be reached", requestId)))
        if (isContract) return yield* contractWallet
        const verdict = yield* verifier.verify(payment.payload, accepted).pipe(
          Effect.catchAll((e) =>
            Effect.logWarning("x402 verification unavailable", e.message).pipe(
              Effect.zipRight(unavailableNow("the payment cannot be verified right now", requestId))
            )
          )
        )
        if (!verdict.isValid) {
          // A concurrent request may have claimed and spent it meanwhile: then that, not the chain's view, is the answer.
          const now = yield* store.holder(asset.toLowerCase(), payment.payer, nonce).pipe(Effect.orElseSucceed(() => Option.none<string>()))
          if (Option.isSome(now) && now.value !== requestId) return yield* Effect.fail(reused())
          if (Option.isSome(now)) return reservationFor(requestId, payment)
          const reason = verdict.invalidReason ?? "invalid_payment"
          yield* Effect.logInfo("x402 payment refused", reason)
          return yield* invalid(`the payment is not valid: ${explain(reason)}`)
        }
        // Work is paid only after it is done: the authorization must outlive the analysis and its settlement.
        if (BigInt(payment.authorization.validBefore) < BigInt(nowSeconds + minimumValiditySeconds)) return yield* expiresTooSoon
        yield* store
          .claim({
            requestId,
            payer: payment.payer,
            asset: asset.toLowerCase(),
            network: NETWORK,
            payTo: payTo.toLowerCase(),
            amount: payment.authorization.value,
            nonce,
            digest,
            validBefore: BigInt(payment.authorization.validBefore),
            fromBlock: head.number > CLAIM_BLOCK_MARGIN ? head.number - CLAIM_BLOCK_MARGIN : 0n,
            paymentPayload: encodePaymentSignatureHeader(payment.payload)
          })
          .pipe(
            Effect.catchTags({
              AuthorizationTaken: () => Effect.fail(reused()),
              RequestPaidOtherwise: () => Effect.fail(reused()),
              SqlError: () => unavailableNow("payment records are unavailable", requestId)
            })
          )
        yield* Effect.logInfo("x402 authorization claimed")
        return reservationFor(requestId, payment)
      }).pipe(Effect.annotateLogs({ request_id: requestId, payer: payment.payer }))

    const resume = (payment: DecodedPayment) => (requestId: RequestId, save: Save) =>
      Effect.gen(function* () {
        const record = yield* store.get(requestId).pipe(Effect.catchAll(() => unavailableNow("payment records are unavailable", requestId)))
        if (Option.isNone(record)) {
          // Nothing was ever claimed for this request, so nothing can land: pay for it now (its result is saved already).
          const reservation = yield* reserve(payment)(requestId).pipe(Effect.catchTag("Conflict", (c) => invalid(c.error.message)))
          return yield* reservation.submit
        }
        // The recorded payment decides, whatever this retry carries: it is submitted from its own stored
        // signature, and only a payment that can no longer land is answered with a 402.
        const outcome = yield* payments.reconcile(requestId, Option.none(), true)
        return yield* settledOrFail(requestId, payment)(outcome)
      }).pipe(saved(save), Effect.annotateLogs({ request_id: requestId, payer: payment.payer }))

    const rail: Context.Tag.Service<X402Funding> = {
      enabled: true,
      identify: (credential) =>
        Effect.gen(function* () {
          const decoded = readPayment(credential.payment)
          if (decoded._tag === "Left") return yield* invalid(decoded.left)
          const payment = decoded.right
          // Signed for another chain, the signature cannot match ours: say which term is wrong.
          if (payment.payload.accepted.network !== NETWORK) {
            return yield* invalid(`the payment is not valid: ${explain("invalid_exact_evm_network_mismatch")}`)
          }
          // The wallet becomes the idempotency scope and the subject of limits: only once its signature proves it.
          const signer = yield* Effect.option(authorizationSigner(asset, payment.authorization, payment.signature))
          if (Option.isNone(signer) || !isAddressEqual(signer.value, payment.authorization.from)) {
            return yield* invalid(`the payment is not valid: ${explain("invalid_exact_evm_signature")}`)
          }
          const method: FundingMethod = {
            payer: { kind: "x402", id: PayerId.make(`wallet:${payment.payer}`) },
            ready: ready(payment),
            reserve: reserve(payment),
            resume: resume(payment)
          }
          return method
        }),
      challenge: challengeFailure(terms, "payment_required", "Payment required: 0.01 USDC per successful analysis over x402 (see PAYMENT-REQUIRED), or a Bearer credit key"),
      challengeWith: (code, message) => challengeFailure(terms, code, message),
      abandon: (requestId) =>
        store.release(requestId).pipe(
          Effect.catchAll((e) => Effect.logWarning("x402 claim release failed", e.message)),
          Effect.asVoid
        ),
      // A claim is released with its attempt; what was submitted is the reconciler's.
      releaseOrphans: () => Effect.void
    }
    return rail
  })
)

/** What x402 needs of a chain: verification, settlement and reads (receipts, authorization state, the head). */
export type ChainServices = Verifier | Settlement | EvmChain

/**
 * The chain seam chosen by the settings: settlement through X402_FACILITATOR_URL when set, else self-settlement
 * with X402_SETTLER_PRIVATE_KEY; both read the chain over X402_RPC_URL.
 */
export const ChainFromSettings: Layer.Layer<ChainServices, ConfigError.ConfigError, AppConfig | PaymentStore | SqlClient.SqlClient> = Layer.unwrapEffect(
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const route = Option.isSome(settings.x402.facilitatorUrl)
      ? Layer.merge(SettlementFacilitator, VerifierFacilitator)
      : Option.isSome(settings.x402.settlerPrivateKey)
        ? Layer.merge(SettlementSelf, VerifierLocal)
        : undefined
    if (!route) {
      return yield* Effect.fail(
        ConfigError.MissingData(
          ["X402_SETTLER_PRIVATE_KEY"],
          "X402_PAY_TO is set, so x402 needs a way to settle: set X402_SETTLER_PRIVATE_KEY (self-settlement) or X402_FACILITATOR_URL"
        )
      )
    }
    return route.pipe(Layer.provideMerge(EvmChainLive))
  })
)

/**
 * Everything x402 needs: off without X402_PAY_TO; else on the given chain seam (by default the one the settings
 * choose; `ChainMemory` with a `MemoryChain` for the sandbox and tests), plus the background reconciler (tell it
 * about resolutions by providing PaymentResolutions).
 */
export const X402Layer = <E = never, R = never>(
  options: ReconcilerOptions = {},
  chain?: Layer.Layer<ChainServices, E, R>
): Layer.Layer<X402Funding | X402Reconciler, ConfigError.ConfigError | E, AppConfig | SqlClient.SqlClient | Exclude<R, PaymentStore>> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const settings = yield* AppConfig
      if (Option.isNone(settings.x402.payTo)) {
        // The card processor, where the composition gives one, decides what the refusal advises.
        const off = Effect.map(Effect.serviceOption(Processor), (cards) => disabled(Option.exists(cards, (p) => p.enabled)))
        return Layer.merge(Layer.effect(X402Funding, off), X402ReconcilerDisabled)
      }
      const seam: Layer.Layer<ChainServices, ConfigError.ConfigError | E, AppConfig | PaymentStore | SqlClient.SqlClient | R> =
        chain ?? ChainFromSettings
      const services = PaymentsLive.pipe(Layer.provideMerge(seam), Layer.provideMerge(PaymentStoreLive))
      return Layer.merge(X402FundingLive, X402ReconcilerLive({ minAge: settings.x402.confirmTimeoutMs, ...options })).pipe(
        Layer.provide(services)
      )
    })
  )
