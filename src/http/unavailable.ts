/** Answers for payment paths that are switched off: the documented "unavailable" errors, never a fake success. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Funding } from "../analysis/Funding.ts"
import { PaymentRequired, ServiceUnavailable } from "../domain/errors.ts"
import { CreditKeyAuth, MorselApi } from "./Api.ts"

const paymentsUnavailable = new ServiceUnavailable({
  error: { code: "payments_unavailable", message: "card credits are not enabled on this server" }
})
export const x402Unavailable = new PaymentRequired({
  error: { code: "x402_unavailable", message: "per-call x402 payments are not enabled on this server" }
})

export const CreditsUnavailableLive = HttpApiBuilder.group(MorselApi, "credits", (handlers) =>
  handlers
    .handle("balance", () => Effect.fail(paymentsUnavailable))
    .handle("checkout", () => Effect.fail(paymentsUnavailable))
    .handle("confirm", () => Effect.fail(paymentsUnavailable))
    .handle("checkoutStatus", () => Effect.fail(paymentsUnavailable))
    .handle("feedback", () => Effect.fail(paymentsUnavailable))
)

export const CreditKeyAuthUnavailable = Layer.succeed(CreditKeyAuth, { bearer: (key) => Effect.succeed(key) })

export const FundingUnavailable = Layer.succeed(
  Funding,
  Funding.of({
    identify: ({ authorization, paymentSignature }) =>
      Option.isSome(authorization)
        ? Effect.fail(paymentsUnavailable)
        : Option.isSome(paymentSignature)
          ? Effect.fail(x402Unavailable)
          : Effect.succeedNone,
    challenge: Effect.fail(x402Unavailable),
    abandon: () => Effect.void
  })
)
