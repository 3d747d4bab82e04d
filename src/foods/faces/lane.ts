/**
 * `POST /v1/nutrition` answered in plain Node, with the bytes the HttpApi stack would send, when the answer is a
 * 200: a body the stack's schema accepts, from a caller the food limits admit, priced. Admitted before it is priced,
 * as the stack does: a caller past the limit costs no pricing. Anything else (a browser's request, a body the schema
 * refuses, a refusal, an unknown food, any doubt) goes on to the stack, which answers it as ever, with the admission
 * the lane decided: a call is counted against the limits once either way, and a body the schema refuses not at all.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { Cause, Effect, Either, Exit, Layer, Option, Runtime, Schema } from "effect"
import { AppConfig } from "../../config.ts"
import { makeClientAddress } from "../../request/clientAddress.ts"
import { parseBody, readBody } from "../../request/body.ts"
import { attachLane, isPlainPost, laneDoor } from "../../http/lanes.ts"
import type { PassOn } from "../../http/nodeServer.ts"
import { admitFoodCall, passWithAdmission } from "./caller.ts"
import { nutritionOf } from "../core/nutritionAnswer.ts"
import { NutritionRequest } from "../core/schemas.ts"

const NUTRITION = "/v1/nutrition"

/** The largest body the lane reads: 20 items of 200-character names fit in a tenth of it. */
const LANE_BODY_BYTES = 64 * 1024

const decodeRequest = Schema.decodeUnknownEither(NutritionRequest)

const requestOf = (body: Buffer): Option.Option<NutritionRequest> => {
  try {
    return Either.getRight(decodeRequest(parseBody(body)))
  } catch {
    return Option.none()
  }
}

export const FoodsLaneLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const door = yield* laneDoor
    if (Option.isNone(door)) return
    const { answer, server } = door.value
    const clientAddress = makeClientAddress((yield* AppConfig).trustedProxies)
    const runtime = yield* Effect.runtime<Effect.Effect.Context<ReturnType<typeof nutritionOf> | ReturnType<typeof admitFoodCall>>>()
    const run = Runtime.runPromiseExit(runtime)

    const take = (request: IncomingMessage, response: ServerResponse, passOn: PassOn): boolean => {
      if (!isPlainPost(request, NUTRITION, LANE_BODY_BYTES)) return false
      // Read on arrival: the socket of a client that hung up no longer names its address.
      const address = clientAddress({ remoteAddress: Option.fromNullable(request.socket.remoteAddress), headers: request.headers })
      void readBody(request, LANE_BODY_BYTES).then(async (body) => {
        if (!Buffer.isBuffer(body)) return
        const payload = requestOf(body)
        if (Option.isNone(payload)) return passOn(body)
        const admission = await run(admitFoodCall(address, request.headers.authorization))
        if (Exit.isSuccess(admission)) {
          const priced = await run(nutritionOf(payload.value))
          if (Exit.isSuccess(priced)) {
            return answer(response, { method: "POST", route: NUTRITION, kind: "nutrition", status: 200, body: JSON.stringify(priced.value) })
          }
        }
        // An admission that ended in a defect is the stack's to decide again.
        const decided = Exit.isSuccess(admission) || Cause.isFailType(admission.cause)
        passOn(body, decided ? (passed) => passWithAdmission(passed, admission) : undefined)
      })
      return true
    }

    yield* attachLane(server, { take })
  })
)
