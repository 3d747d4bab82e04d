/** Settling and reconciling x402 payments: exactly one transfer per claimed authorization, whatever fails in between. */
import type { PaymentRequirements } from "@x402/core/types"
import { Context, Data, Duration, Effect, Either, Layer, Option, Schedule } from "effect"
import { getAddress, type Hex } from "viem"
import { AppConfig } from "../config.ts"
import type { RequestId } from "../domain/ids.ts"
import { carriesTransfer, EvmChain, type ExpectedTransfer } from "./EvmChain.ts"
import { PaymentStore, type PaymentRecord } from "./PaymentStore.ts"
import { authorizationDigest, decodePayment, receipt, requirements as termsRequirements, settledResponse } from "./protocol.ts"
import { Settlement, type SignedPayment, type Submission } from "./Settlement.ts"

/** Where a payment stands after settling or reconciling it. */
export type Outcome = Data.TaggedEnum<{
  Settled: { readonly paymentResponse: string; readonly txHash: Hex }
  Pending: { readonly txHash: Option.Option<Hex> }
  Failed: { readonly reason: string }
}>
export const Outcome = Data.taggedEnum<Outcome>()

const pending = (txHash: Option.Option<Hex>): Outcome => Outcome.Pending({ txHash })

/** A record marked settled with its receipt is settled; any other is failed, for its recorded reason or `reason`. */
const settledOrFailed = (r: PaymentRecord, reason: string): Outcome =>
  r.state === "settled" && Option.isSome(r.paymentResponse) && Option.isSome(r.txHash)
    ? Outcome.Settled({ paymentResponse: r.paymentResponse.value, txHash: r.txHash.value })
    : Outcome.Failed({ reason: Option.getOrElse(r.failureReason, () => reason) })

/** The outcome of a payment that reached its end, if it did. */
const final = (r: PaymentRecord): Option.Option<Outcome> =>
  (r.state === "settled" && Option.isSome(r.paymentResponse) && Option.isSome(r.txHash)) || r.state === "failed"
    ? Option.some(settledOrFailed(r, "the payment failed"))
    : Option.none()

export class Payments extends Context.Tag("morsel/x402/Payments")<
  Payments,
  {
    /** Submit the request's claimed payment (or follow the submission already made) and wait for it, bounded. */
    readonly settle: (requestId: RequestId, payment: SignedPayment) => Effect.Effect<Outcome>
    /**
     * Find out what became of a payment: a claimed one is submitted (with the signed payment stored at its claim)
     * while valid; else receipt by hash, the token's authorization state and its AuthorizationUsed log, sending it
     * again while still valid, or a failed payment once it can no longer land. `wait` bounds a receipt wait after
     * sending (a caller is waiting); without it the next pass looks again.
     */
    readonly reconcile: (requestId: RequestId, payment: Option.Option<SignedPayment>, wait: boolean) => Effect.Effect<Outcome>
  }
>() {}

const expectedOf = (r: PaymentRecord): ExpectedTransfer => ({
  asset: getAddress(r.asset),
  from: getAddress(r.payer),
  to: getAddress(r.payTo),
  value: BigInt(r.amount)
})

export const PaymentsLive = Layer.effect(
  Payments,
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const chain = yield* EvmChain
    const store = yield* PaymentStore
    const settlement = yield* Settlement
    const confirmWithin = Duration.millis(settings.x402.confirmTimeoutMs)
    const pollEvery = Duration.millis(Math.min(1_000, Math.max(50, Math.floor(settings.x402.confirmTimeoutMs / 20))))

    const requirementsOf = (r: PaymentRecord): PaymentRequirements => ({
      ...termsRequirements({ payTo: getAddress(r.payTo), asset: getAddress(r.asset), publicBaseUrl: settings.publicBaseUrl }),
      amount: r.amount
    })

    /** The signed payment stored with the claim, if it is still there and is the recorded authorization. */
    const storedPayment = (r: PaymentRecord): Option.Option<SignedPayment> =>
      Option.flatMap(r.paymentPayload, (stored) =>
        Either.getRight(decodePayment(stored)).pipe(Option.filter((p) => authorizationDigest(getAddress(r.asset), p.authorization) === r.digest))
      )

    const annotate = (r: PaymentRecord) =>
      Effect.annotateLogs({ request_id: r.requestId, payer: r.payer, authorization_digest: r.digest })

    /** The transaction carried this payment's transfer: record it as settled. */
    const settledBy = (r: PaymentRecord, txHash: Hex) =>
      store.markSettled(r.requestId, txHash, receipt(settledResponse(txHash, r.payer))).pipe(
        Effect.tap(() => Effect.logInfo("x402 payment settled").pipe(Effect.annotateLogs({ tx_hash: txHash }))),
        Effect.map((settled) => settledOrFailed(settled, "the payment failed"))
      )

    const failed = (r: PaymentRecord, reason: string) =>
      store.markFailed(r.requestId, reason).pipe(
        Effect.tap(() => Effect.logWarning("x402 payment failed", reason)),
        Effect.map((done) => settledOrFailed(done, reason))
      )

    /** Some(outcome) when the transaction is mined: settled if it carried the transfer, None while unmined or reverted. */
    const checkReceipt = (r: PaymentRecord, txHash: Hex) =>
      chain.receipt(txHash).pipe(
        Effect.map((found) =>
          Option.filter(found, (rc) => rc.status === "success" && carriesTransfer(rc, expectedOf(r))).pipe(Option.as(txHash))
        )
      )

    /**
     * Polls for the receipt until it exists or the confirmation bound passes. The polling only reads, so it is
     * interruptible even inside an uninterruptible request handler (else the bound could never cut it short).
     */
    const awaitReceipt = (txHash: Hex) =>
      chain.receipt(txHash).pipe(
        Effect.flatMap(Option.match({ onNone: () => Effect.fail("not yet" as const), onSome: Effect.succeed })),
        Effect.retry(Schedule.spaced(pollEvery)),
        Effect.interruptible,
        Effect.timeoutOption(confirmWithin)
      )

    const current = (requestId: RequestId) =>
      store.get(requestId).pipe(Effect.flatMap(Option.match({ onNone: () => Effect.dieMessage(`no x402 payment for request ${requestId}`), onSome: Effect.succeed })))

    /** Waits (bounded) for a sent transaction; a reverted one is looked into on chain. */
    const follow = (requestId: RequestId, txHash: Hex, payment: Option.Option<SignedPayment>) =>
      Effect.gen(function* () {
        const mined = yield* awaitReceipt(txHash)
        const r = yield* current(requestId)
        if (Option.isNone(mined)) return pending(Option.some(txHash))
        const rc = mined.value
        if (rc.status === "success" && carriesTransfer(rc, expectedOf(r))) return yield* settledBy(r, txHash)
        return yield* reconcileRecord(r, payment, false)
      })

    const afterSubmission = (requestId: RequestId, submission: Submission, payment: Option.Option<SignedPayment>, wait: boolean) =>
      Effect.gen(function* () {
        const r = yield* current(requestId)
        switch (submission._tag) {
          case "Lost":
            return yield* Option.match(final(r), {
              onSome: Effect.succeed,
              onNone: () =>
                Option.match(r.txHash, { onSome: (h) => (wait ? follow(requestId, h, payment) : Effect.succeed(pending(Option.some(h)))), onNone: () => Effect.succeed(pending(Option.none())) })
            })
          case "NotSent":
            yield* Effect.logWarning("x402 payment not sent yet", submission.reason)
            // Someone else's submission of it may be under way: follow that one.
            return Option.isSome(r.txHash) && wait ? yield* follow(requestId, r.txHash.value, payment) : pending(r.txHash)
          case "Unknown":
            return pending(Option.orElse(submission.txHash, () => r.txHash))
          case "Confirmed":
            return yield* settledBy(r, submission.txHash)
          case "Broadcast":
            return wait ? yield* follow(requestId, submission.txHash, payment) : pending(Option.some(submission.txHash))
          case "Rejected":
            // The payer may have spent the authorization themselves (it still pays us): look before calling it failed.
            return yield* reconcileRecord(r, payment, false, submission.reason)
        }
      })

    const reconcileRecord = (
      r: PaymentRecord,
      payment: Option.Option<SignedPayment>,
      wait: boolean,
      rejection?: string
    ): Effect.Effect<Outcome, unknown> =>
      Effect.gen(function* () {
        const done = final(r)
        if (Option.isSome(done)) return done.value
        if (r.state === "claimed" && rejection === undefined) {
          // Never submitted, so nothing of ours is in flight: submit it while the chain still accepts it.
          const signed = Option.orElse(payment, () => storedPayment(r))
          const head = yield* chain.latestBlock
          if (Option.isSome(signed) && head.timestamp < r.validBefore) {
            const submission = yield* settlement.submit(r, signed.value, requirementsOf(r))
            return yield* afterSubmission(r.requestId, submission, signed, wait)
          }
        }
        // 1. The recorded transaction.
        if (Option.isSome(r.txHash)) {
          const paid = yield* checkReceipt(r, r.txHash.value)
          if (Option.isSome(paid)) return yield* settledBy(r, paid.value)
        }
        // 2. The token's own record, read at one block so state and time agree.
        const head = yield* chain.latestBlock
        const asset = getAddress(r.asset)
        const payer = getAddress(r.payer)
        const used = yield* chain.authorizationUsed(asset, payer, r.nonce, head.number)
        if (used) {
          const spent = yield* chain.authorizationSpentBy(asset, payer, r.nonce, { fromBlock: r.fromBlock, validBefore: r.validBefore })
          if (Option.isNone(spent)) return pending(r.txHash)
          if (spent.value.kind === "canceled") return yield* failed(r, "the payer canceled the authorization before it was settled")
          const paid = yield* checkReceipt(r, spent.value.txHash)
          if (Option.isSome(paid)) return yield* settledBy(r, paid.value)
          // The nonce went to another transfer (signed with the same nonce): this one can never be spent.
          const other = yield* chain.receipt(spent.value.txHash)
          return Option.isSome(other) ? yield* failed(r, "the payer spent the authorization's nonce on another transfer") : pending(r.txHash)
        }
        // 3. Unspent and past validBefore at the chain's head: no later block can spend it.
        if (head.timestamp >= r.validBefore) {
          return yield* failed(r, rejection ?? "the authorization expired before its transfer was mined")
        }
        if (rejection !== undefined) {
          // Nothing of ours is in flight (the refused submission was the first): the refusal is final.
          if (Option.isNone(r.txHash)) return yield* failed(r, rejection)
          return pending(r.txHash)
        }
        // A claim without its signed payment cannot be submitted; it fails once it expires.
        if (r.state === "claimed") return pending(Option.none())
        // 4. Still valid and not on chain: send it again.
        yield* store.countAttempt(r.requestId)
        const submission = yield* settlement.resend(r, payment, requirementsOf(r))
        if (submission._tag === "Rejected") {
          yield* Effect.logWarning("x402 payment resend refused", submission.reason)
          return pending(r.txHash)
        }
        return yield* afterSubmission(r.requestId, submission, payment, wait)
      }).pipe(annotate(r))

    /** Any storage or chain trouble leaves the payment pending: it is retried, never dropped. */
    const orPending = (requestId: RequestId) => (self: Effect.Effect<Outcome, unknown>) =>
      self.pipe(
        Effect.catchAll((e) =>
          Effect.logWarning("x402 payment outcome unknown for now", e instanceof Error ? e.message : String(e)).pipe(
            Effect.zipRight(store.get(requestId).pipe(Effect.map((r) => Option.flatMap(r, (x) => x.txHash)), Effect.orElseSucceed(() => Option.none<Hex>()))),
            Effect.map(pending)
          )
        )
      )

    return {
      settle: (requestId, payment) =>
        Effect.gen(function* () {
          const r = yield* current(requestId)
          const done = final(r)
          if (Option.isSome(done)) return done.value
          if (r.state === "submitted") {
            return yield* Option.match(r.txHash, {
              onSome: (h) => follow(requestId, h, Option.some(payment)),
              onNone: () => reconcileRecord(r, Option.some(payment), true)
            })
          }
          // The request's own settlement is under way: the background reconciler need not race it.
          yield* store.touch(requestId)
          const submission = yield* settlement.submit(r, payment, requirementsOf(r))
          return yield* afterSubmission(requestId, submission, Option.some(payment), true)
        }).pipe(orPending(requestId)),
      reconcile: (requestId, payment, wait) =>
        Effect.gen(function* () {
          const r = yield* current(requestId)
          return yield* reconcileRecord(r, payment, wait)
        }).pipe(orPending(requestId))
    }
  })
)
