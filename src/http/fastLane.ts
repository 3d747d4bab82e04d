/**
 * The two hottest answers of `POST /v1/analyze` given in plain Node, with the bytes the HttpApi stack would send: the
 * 402 price challenge to a valid request that carries no funding, and the replay of a completed analysis to the same
 * request (same credential, Idempotency-Key and input). Any other request, or any doubt, goes on to the stack.
 */
import { createHash } from "node:crypto"
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import { Context, Effect, Either, Exit, Layer, Option, Runtime, Schema } from "effect"
import { inputFingerprint } from "../analysis/AnalyzeRequests.ts"
import { Funding } from "../analysis/Funding.ts"
import { MAX_BODY_BYTES } from "../domain/bodies.ts"
import { PaymentRequired } from "../domain/errors.ts"
import type { InputFingerprint } from "../domain/ids.ts"
import { inspectImage } from "../domain/image.ts"
import { AnalyzeRequest } from "../domain/schemas.ts"
import { Limits } from "../limits/Limits.ts"
import { paymentRequiredHeader } from "../x402/protocol.ts"
import { AnalyzeHeaders } from "./Api.ts"
import { parseBody, readBody } from "../request/body.ts"
import { attachLane, isPlainPost, laneDoor } from "./lanes.ts"
import type { PassOn } from "./nodeServer.ts"

const ANALYZE = "/v1/analyze"

/** A completed result as REST sent it, replayable until `untilMs`. */
export interface Replayable {
  readonly body: string
  readonly paymentResponse: Option.Option<string>
  readonly untilMs: number
}

/**
 * The identity of an analysis request for replays, as the stack's idempotency sees it: who sends it under which
 * Idempotency-Key (`head`: the credential and the key), and for which input (`full`: the head and the input fingerprint).
 */
export interface ReplayKey {
  readonly head: string
  readonly full: string
}

type Headers = IncomingHttpHeaders | Readonly<Record<string, string | undefined>>

const headOf = (headers: Headers): string =>
  createHash("sha256")
    .update(`${headers.authorization ?? ""}\n${headers["payment-signature"] ?? ""}\n${headers["idempotency-key"] ?? ""}`)
    .digest("base64")

const fullOf = (head: string, input: InputFingerprint): string => createHash("sha256").update(`${head}\n${input}`).digest("base64")

export const replayKey = (headers: Headers, input: InputFingerprint): ReplayKey => {
  const head = headOf(headers)
  return { head, full: fullOf(head, input) }
}

/** Completed results this instance served, by `replayKey`; they never change before their recovery window ends. */
export class ReplayCache extends Context.Tag("morsel/ReplayCache")<
  ReplayCache,
  {
    readonly record: (key: ReplayKey, replayable: Replayable) => void
    /** The result while it is still replayable at `nowMs`. */
    readonly lookup: (full: string, nowMs: number) => Replayable | undefined
    /** Whether a result is kept for this credential and Idempotency-Key (with whatever body). */
    readonly holds: (head: string) => boolean
  }
>() {}

/** How many completed results an instance keeps for replays (a result is a few kilobytes). */
const REPLAYS_KEPT = 2_048

export const ReplayCacheLive = Layer.sync(ReplayCache, () => {
  // A Map iterates in insertion order: the first key is the least recently recorded or used.
  const entries = new Map<string, { readonly head: string; readonly replayable: Replayable }>()
  const heads = new Map<string, number>()
  const remove = (full: string) => {
    const entry = entries.get(full)
    if (entry === undefined) return
    entries.delete(full)
    const left = (heads.get(entry.head) ?? 1) - 1
    if (left > 0) heads.set(entry.head, left)
    else heads.delete(entry.head)
  }
  return ReplayCache.of({
    record: ({ full, head }, replayable) => {
      remove(full)
      entries.set(full, { head, replayable })
      heads.set(head, (heads.get(head) ?? 0) + 1)
      const oldest = entries.keys().next()
      if (entries.size > REPLAYS_KEPT && !oldest.done) remove(oldest.value)
    },
    lookup: (full, nowMs) => {
      const entry = entries.get(full)
      if (entry === undefined) return undefined
      if (nowMs >= entry.replayable.untilMs) {
        remove(full)
        return undefined
      }
      entries.delete(full)
      entries.set(full, entry)
      return entry.replayable
    },
    holds: (head) => heads.has(head)
  })
})

const decodeHeaders = Schema.decodeUnknownEither(AnalyzeHeaders)
const decodeRequest = Schema.decodeUnknownEither(AnalyzeRequest)
const encodeChallenge = Schema.encodeSync(PaymentRequired)

/** The fingerprint of a valid analysis request's input (headers, body and image as the stack checks them); none for anything else. */
const validInput = (request: IncomingMessage, body: Buffer): Option.Option<() => InputFingerprint> => {
  if (Either.isLeft(decodeHeaders(request.headers))) return Option.none()
  let json: unknown
  try {
    json = parseBody(body)
  } catch {
    return Option.none()
  }
  const decoded = decodeRequest(json)
  if (Either.isLeft(decoded)) return Option.none()
  const image = inspectImage(decoded.right.image_base64, decoded.right.mime_type)
  return Either.isLeft(image) ? Option.none() : Option.some(() => inputFingerprint(image.right.bytes, decoded.right))
}

/** Attaches the lane to the service's own Node server, when it runs on one (FrontDoor) and requests are not traced. */
export const FastLaneLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const door = yield* laneDoor
    if (Option.isNone(door)) return
    const { server, answer: laneAnswer } = door.value
    const replays = yield* ReplayCache
    const limits = yield* Limits
    const funding = yield* Funding
    const clock = yield* Effect.clock
    const runtime = yield* Effect.runtime<never>()
    const run = Runtime.runPromiseExit(runtime)

    // The challenge is the same for every request: its body and header are made once (none when x402 is off).
    const challenge = Option.flatMap(Exit.causeOption(Runtime.runSyncExit(runtime)(funding.challenge)), (cause) =>
      Option.flatMap(
        Option.filter(Option.fromNullable(cause._tag === "Fail" ? cause.error : undefined), (error) => error._tag === "PaymentRequired"),
        (error) =>
          Option.map(Option.fromNullable(error.payment_required), (offer) => ({
            body: JSON.stringify(encodeChallenge(error)),
            header: paymentRequiredHeader(offer)
          }))
      )
    )

    const answer = (response: ServerResponse, status: number, body: string, headers: Readonly<Record<string, string>>) =>
      laneAnswer(response, { method: "POST", route: ANALYZE, kind: status === 200 ? "replay" : "challenge", status, body, headers })

    /** Whether every limit was open at the instance's last look, looking again when that look is stale. */
    const limitsOpen = async (): Promise<boolean> =>
      limits.openAt(clock.unsafeCurrentTimeMillis()) || Exit.isSuccess(await run(limits.peek))

    const take = (request: IncomingMessage, response: ServerResponse, passOn: PassOn): boolean => {
      if (!isPlainPost(request, ANALYZE, MAX_BODY_BYTES)) return false
      const headers = request.headers
      const funded = headers.authorization !== undefined || headers["payment-signature"] !== undefined
      // A funded request is read only when a result is kept under its credential and key: a new analysis is not delayed.
      const head = funded ? headOf(headers) : ""
      if (funded ? !replays.holds(head) : Option.isNone(challenge)) return false
      void readBody(request, MAX_BODY_BYTES).then(async (body) => {
        if (!Buffer.isBuffer(body)) return
        const input = validInput(request, body)
        if (funded) {
          const replay = Option.isSome(input) ? replays.lookup(fullOf(head, input.value()), clock.unsafeCurrentTimeMillis()) : undefined
          if (replay === undefined) return passOn(body)
          return answer(response, 200, replay.body, Option.match(replay.paymentResponse, { onNone: () => ({}), onSome: (value) => ({ "payment-response": value }) }))
        }
        if (Option.isNone(challenge) || Option.isNone(input) || !(await limitsOpen())) return passOn(body)
        answer(response, 402, challenge.value.body, { "payment-required": challenge.value.header })
      })
      return true
    }

    yield* attachLane(server, { take })
  })
)
