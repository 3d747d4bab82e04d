/** One analysis request from any transport (REST, MCP): validation, funding, idempotency, limits, the analysis and payment, in that order. */
import { createHash } from "node:crypto"
import { SqlError } from "@effect/sql"
import { Clock, Context, Duration, Effect, Either, Exit, Fiber, Layer, Metric, Option, Ref, Schedule, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { orStorageUnavailable, orStorageUnavailableFor, storageUnavailable } from "../db/storage.ts"
import {
  AnalysisFailed,
  type AnalysisTimeout,
  Conflict,
  Gone,
  InvalidRequest,
  type NoFoodDetected,
  PayloadTooLarge,
  type PaymentRequired,
  ServiceUnavailable,
  type TooManyRequests,
  type Unauthorized
} from "../domain/errors.ts"
import { InputFingerprint, type RequestId } from "../domain/ids.ts"
import { inspectImage } from "../domain/image.ts"
import { AnalysisResult, type AnalyzeRequest } from "../domain/schemas.ts"
import { attemptLeaseMs } from "../limits/lease.ts"
import { type Admission, admissionOf, claimCheck, Limits } from "../limits/Limits.ts"
import { logFieldsOf, type ModelCall } from "../model/usage.ts"
import { analyses, analysisDuration, count, outcomeOf } from "../observability/metrics.ts"
import { AnalysisRejected, Analyzer } from "./Analyzer.ts"
import type { ModelPhoto } from "./VisionModel.ts"
import { type Credential, Funding, type FundingMethod, type Save, type Settled } from "./Funding.ts"
import { AttemptLost, nextRequestId, RequestStore, RESULT_RETENTION_MS } from "./RequestStore.ts"

/** What makes two requests "the same input"; the image itself is never stored. */
export const inputFingerprint = (image: Uint8Array, request: AnalyzeRequest): InputFingerprint =>
  InputFingerprint.make(
    createHash("sha256")
      .update(createHash("sha256").update(image).digest("hex"))
      .update(`|${request.mime_type}|${request.language}|${request.known_total_grams ?? ""}`)
      .digest("hex")
  )

const validateResult = Schema.validate(AnalysisResult)

/**
 * Counts a started analysis by outcome (`success` or its error code), times it and logs one line about it, with what
 * its model call used (tokens, time, and cost when prices are set).
 */
const observed = <A, E extends { readonly error: { readonly code: string } }, R>(
  effect: Effect.Effect<A, E, R>,
  modelCall: Ref.Ref<ModelCall | undefined>
) =>
  Effect.flatMap(Effect.timed(Effect.exit(effect)), ([elapsed, exit]) => {
    const outcome = outcomeOf(exit, "success")
    const seconds = Duration.toSeconds(elapsed)
    return Effect.zipRight(
      Effect.all([
        Metric.update(analysisDuration, seconds),
        count(analyses, { outcome }),
        Effect.flatMap(Ref.get(modelCall), (call) =>
          Effect.logInfo("analysis finished").pipe(Effect.annotateLogs({ outcome, seconds, ...(call === undefined ? {} : logFieldsOf(call)) }))
        )
      ]),
      exit
    )
  })

/** A request as every transport (REST, MCP) hands it over, after schema validation. */
export interface AnalyzeCall {
  readonly idempotencyKey: string
  /** What the request pays with, decoded by the transport; a refusal (both a key and a payment) is answered after the image is checked. */
  readonly credential: Either.Either<Credential, InvalidRequest>
  readonly payload: AnalyzeRequest
}

/** A served result and, for x402, the PAYMENT-RESPONSE receipt to hand back with it. */
export interface Served {
  readonly result: AnalysisResult
  readonly paymentResponse: Option.Option<string>
  /** Until when the same request is answered with this result (the recovery window, counted from no later than completion). */
  readonly replayableUntil: Date
  /** The input the result belongs to. */
  readonly input: InputFingerprint
}

export type AnalyzeError = Effect.Effect.Error<ReturnType<Context.Tag.Service<typeof AnalyzeRequests>["analyze"]>>

export class AnalyzeRequests extends Context.Tag("morsel/AnalyzeRequests")<
  AnalyzeRequests,
  {
    readonly analyze: (
      call: AnalyzeCall
    ) => Effect.Effect<
      Served,
      | InvalidRequest
      | PayloadTooLarge
      | Unauthorized
      | PaymentRequired
      | Conflict
      | Gone
      | TooManyRequests
      | NoFoodDetected
      | AnalysisFailed
      | AnalysisTimeout
      | ServiceUnavailable
    >
    /**
     * Whether a call may have its photo fetched (MCP's `image_file`), asked before anything is downloaded: only for
     * a caller who could pay. A call without payment gets the limits, then the challenge, as `analyze` would answer
     * it; an unknown key or a payment that does not decode is refused as `analyze` refuses it; a retry of a request
     * the payer already made under the same key goes on (its photo decides between replay and conflict); any other
     * call passes the service-wide limits and then needs a key with a credit left or a payment the chain would take.
     */
    readonly mayFetch: (
      credential: Either.Either<Credential, InvalidRequest>,
      idempotencyKey: string
    ) => Effect.Effect<void, InvalidRequest | Unauthorized | TooManyRequests | PaymentRequired | ServiceUnavailable>
  }
>() {}

export const AnalyzeRequestsLive = Layer.effect(
  AnalyzeRequests,
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const funding = yield* Funding
    const store = yield* RequestStore
    const limits = yield* Limits
    const analyzer = yield* Analyzer
    const leaseMs = attemptLeaseMs(settings)

    /** Storage trouble and a lost attempt are 503s the caller may retry unchanged, never a 500. */
    const stored = <A, E, R>(requestId: RequestId, effect: Effect.Effect<A, E | SqlError.SqlError | AttemptLost, R>) =>
      Effect.catchIf(
        effect,
        (e): e is SqlError.SqlError | AttemptLost => e instanceof SqlError.SqlError || e instanceof AttemptLost,
        (e) => Effect.logError("analysis request storage failed", e).pipe(Effect.zipRight(Effect.fail(storageUnavailable(requestId))))
      )

    /**
     * Every answer about a recorded attempt names it (SPEC §7): a 503 raised by a step that does not know the attempt
     * (a reservation, an admission, a consumed credit) gets its id here, and so does storage that failed beyond a
     * typed error (a rollback on a cut connection dies), which would otherwise reach the transport without it.
     */
    const naming =
      (requestId: RequestId) =>
      <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(
          Effect.catchSomeDefect((defect) =>
            defect instanceof SqlError.SqlError
              ? Option.some(Effect.logError("analysis request storage failed", defect).pipe(Effect.zipRight(Effect.fail(storageUnavailable(requestId)))))
              : Option.none()
          ),
          Effect.mapError((error) =>
            error instanceof ServiceUnavailable && error.error.request_id === undefined
              ? new ServiceUnavailable({ ...error, error: { ...error.error, request_id: requestId } })
              : error
          )
        )

    /** A result settled now: the window is counted from before the settlement, so it never outlasts the stored one. */
    const served = (result: AnalysisResult, settled: Settled, settling: number, input: InputFingerprint): Served => ({
      result,
      paymentResponse: settled.paymentResponse,
      replayableUntil: new Date(settling + RESULT_RETENTION_MS),
      input
    })

    /**
     * How a funding method saves the result of `requestId`, with what its model call used (`usage`, kept by the same
     * statement); storage trouble is a 503, a failure a closed attempt.
     */
    const saveOf = (requestId: RequestId, result: AnalysisResult, usage?: ModelCall): Save => ({
      pending: stored(requestId, store.pending(requestId, result, Option.none(), usage)),
      complete: (paymentResponse) => stored(requestId, store.complete(requestId, result, paymentResponse, usage)),
      failed: (code) => Effect.ignoreLogged(store.fail(requestId, code, false, usage))
    })

    /** The analysis itself runs on its own fiber: a caller who hangs up does not cancel it, the deadline still does. */
    const analyse = (
      requestId: RequestId,
      image: Uint8Array,
      photo: Effect.Effect<ModelPhoto>,
      payload: AnalyzeRequest,
      modelCall: Ref.Ref<ModelCall | undefined>
    ) =>
      analyzer
        .run({
          requestId,
          image,
          photo,
          mime: payload.mime_type,
          language: payload.language,
          knownTotalGrams: payload.known_total_grams,
          onModelCall: (call) => Ref.set(modelCall, call)
        })
        .pipe(
          Effect.flatMap((result) =>
            validateResult(result).pipe(
              Effect.mapError(
                () =>
                  new AnalysisRejected({
                    error: new AnalysisFailed({
                      error: { code: "analysis_failed", message: "the analysis produced an invalid result", request_id: requestId }
                    }),
                    countsAsFailure: true
                  })
              )
            )
          ),
          Effect.interruptible,
          Effect.forkDaemon,
          Effect.flatMap(Fiber.join)
        )

    /**
     * An attempt that failed while storage was away (its end, or its payment's refusal, could not be written) stays
     * recorded as running, its reservation held and its key answering 409 in_progress until its lease ends. This
     * instance knows it ended: it closes it as the sweeper would, once storage answers again (asked every second,
     * for as long as the lease), so that a retry of the same request is served as soon as the database is back. An
     * attempt already closed is left as it is.
     */
    const closeWhenStorageReturns = (requestId: RequestId) =>
      store.abandonEnded(requestId).pipe(
        Effect.flatMap((ended) => Effect.forEach(ended, (stale) => funding.abandon(stale.requestId, stale.funding), { discard: true })),
        Effect.retry({ schedule: Schedule.spaced("1 second"), times: Math.ceil(leaseMs / 1000) }),
        Effect.ignoreLogged,
        Effect.forkDaemon,
        Effect.asVoid
      )

    const attempt = (
      method: FundingMethod,
      requestId: RequestId,
      admitted: Effect.Effect<Admission, TooManyRequests | ServiceUnavailable>,
      image: Uint8Array,
      payload: AnalyzeRequest,
      input: InputFingerprint,
      modelCall: Ref.Ref<ModelCall | undefined>
    ) =>
      Effect.gen(function* () {
        // Refused before anything was reserved: the attempt never became one. A reservation whose rollback died
        // with a cut connection ends the same way (a defect, not an error); a credit it held returns as an orphan.
        const forget = Effect.catchAll(store.forget(requestId), () => closeWhenStorageReturns(requestId))
        const admission = yield* admitted.pipe(Effect.tapErrorCause(() => forget))
        // The photo is made ready for the model (tens of milliseconds, off the event loop) while the credit or the
        // payment is reserved: begun only for an admitted attempt, stopped if the reservation is refused.
        const photo = yield* Effect.forkDaemon(analyzer.prepare(image, payload.mime_type))
        const reservation = yield* method.reserve(requestId).pipe(
          Effect.tapErrorCause(() => forget),
          Effect.onError(() => Effect.zipRight(Fiber.interrupt(photo), admission.release))
        )
        // Whatever was reserved goes back; if storage fails here, the attempt is closed once it answers again.
        const giveBack = (code: string, countsAsFailure: boolean) =>
          reservation.release.pipe(
            Effect.zipRight(Effect.flatMap(Ref.get(modelCall), (usage) => store.fail(requestId, code, countsAsFailure, usage))),
            Effect.catchAll(() => closeWhenStorageReturns(requestId))
          )
        return yield* Effect.gen(function* () {
          const result = yield* analyse(requestId, image, Fiber.join(photo), payload, modelCall).pipe(
            // A result's slot is freed by the statement that saves it (migration 0010); any other end frees it here.
            Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : admission.release)),
            Effect.catchTag("AnalysisRejected", (rejected) =>
              Effect.zipRight(giveBack(rejected.error.error.code, rejected.countsAsFailure), Effect.fail(rejected.error))
            )
          )
          const settling = yield* Clock.currentTimeMillis
          const settled = yield* reservation.settle(saveOf(requestId, result, yield* Ref.get(modelCall))).pipe(
            // A payment that could not be settled or saved: the rail's own clean-up may have met the same outage.
            Effect.tapError((error) => (error._tag === "ServiceUnavailable" ? closeWhenStorageReturns(requestId) : Effect.void))
          )
          return served(result, settled, settling, input)
        }).pipe(Effect.tapDefect(() => giveBack("internal_error", false)))
      })

    const resume = (method: FundingMethod, requestId: RequestId, result: AnalysisResult, input: InputFingerprint) =>
      Effect.flatMap(Clock.currentTimeMillis, (settling) =>
        Effect.map(method.resume(requestId, saveOf(requestId, result)), (settled) => served(result, settled, settling, input))
      )

    // A challenge is only worth paying when the analysis could start: limits come before the 402.
    const unfunded = Effect.zipRight(limits.peek, funding.challenge)

    const mayFetch = (decoded: Either.Either<Credential, InvalidRequest>, idempotencyKey: string) =>
      Effect.gen(function* () {
        const credential = yield* decoded
        if (credential._tag === "None") return yield* unfunded
        const method = yield* funding.identify(credential)
        if (yield* orStorageUnavailable(store.holds(method.payer.id, idempotencyKey))) return
        yield* limits.peek
        yield* method.ready
      })

    const analyze = ({ credential: decoded, idempotencyKey, payload }: AnalyzeCall) =>
      Effect.gen(function* () {
        const inspected = inspectImage(payload.image_base64, payload.mime_type)
        if (Either.isLeft(inspected)) {
          const { message, reason } = inspected.left
          return yield* reason === "image_too_large"
            ? new PayloadTooLarge({ error: { code: "image_too_large", message } })
            : new InvalidRequest({ error: { code: reason, message } })
        }
        const image = inspected.right.bytes
        const credential = yield* decoded
        if (credential._tag === "None") return yield* unfunded
        const method = yield* funding.identify(credential)
        const input = inputFingerprint(image, payload)
        // A new key's admission is decided by the statement that records its attempt.
        const inClaim = yield* limits.inClaim(method.payer)
        const newRequestId = yield* nextRequestId
        const { abandoned, claim } = yield* store
          .claim({
            payer: method.payer.id,
            idempotencyKey,
            fingerprint: input,
            funding: method.payer.kind,
            leaseMs,
            admission: claimCheck(inClaim),
            requestId: newRequestId
          })
          .pipe(
            // The statement may have reached the database and recorded the attempt, its answer lost with the
            // connection: nobody would close that attempt before its lease ends (64 s of 409 for the retry). It is
            // closed once storage answers, like any attempt the outage cut off; the caller's 503 names it.
            Effect.tapErrorCause(() => closeWhenStorageReturns(newRequestId)),
            orStorageUnavailableFor(newRequestId)
          )
        yield* Effect.forEach(abandoned, (stale) => funding.abandon(stale.requestId, stale.funding), { discard: true })
        switch (claim._tag) {
          case "Replay":
            return {
              result: claim.result,
              paymentResponse: claim.paymentResponse,
              replayableUntil: new Date(claim.completedAt.getTime() + RESULT_RETENTION_MS),
              input
            }
          case "InProgress":
            return yield* new Conflict({
              error: { code: "in_progress", message: "this request is still running; retry it unchanged", request_id: claim.requestId }
            })
          case "Conflict":
            return yield* new Conflict({
              error: {
                code: "idempotency_conflict",
                message: "this Idempotency-Key was used with a different input; recover the original request or use a new key",
                request_id: claim.requestId
              }
            })
          case "Expired":
            return yield* new Gone({
              error: { code: "result_expired", message: "the 24-hour result recovery window has passed", request_id: claim.requestId }
            })
          case "Pending":
            return yield* naming(claim.requestId)(resume(method, claim.requestId, claim.result, input)).pipe(
              Effect.annotateLogs({ request_id: claim.requestId, funding: method.payer.kind })
            )
          case "Started": {
            const { reached, requestId } = claim
            const admitted = admissionOf(limits, inClaim, method.payer, requestId, reached)
            const modelCall = yield* Ref.make<ModelCall | undefined>(undefined)
            // Every line logged while the analysis runs names it and how it is paid.
            return yield* observed(naming(requestId)(attempt(method, requestId, admitted, image, payload, input, modelCall)), modelCall).pipe(
              Effect.annotateLogs({ request_id: requestId, funding: method.payer.kind })
            )
          }
        }
      })

    return AnalyzeRequests.of({ analyze, mayFetch })
  })
)
