/** Verification of an x402 payment before any work: x402's exact-EVM rules in process, or a facilitator's /verify. */
import { x402Facilitator } from "@x402/core/facilitator"
import { HTTPFacilitatorClient } from "@x402/core/server"
import { type PaymentPayload, type PaymentRequirements, VerifyError, type VerifyResponse } from "@x402/core/types"
import { ExactEvmScheme } from "@x402/evm/exact/facilitator"
import { Context, Effect, Layer, Option } from "effect"
import { zeroAddress } from "viem"
import { AppConfig } from "../config.ts"
import { ChainUnavailable, EvmChain } from "./EvmChain.ts"
import { NETWORK } from "./protocol.ts"

export class Verifier extends Context.Tag("morsel/x402/Verifier")<
  Verifier,
  {
    /** Scheme, network, EIP-712 signature, payTo, validity window, exact amount, asset code, then a simulated transfer. */
    readonly verify: (payload: PaymentPayload, requirements: PaymentRequirements) => Effect.Effect<VerifyResponse, ChainUnavailable>
  }
>() {}

const refused = (message: string) => new Error(`the verifier does not send transactions (${message})`)

/** x402's own exact-EVM verifier over our RPC; it only reads, so its signer holds no key. */
export const VerifierLocal = Layer.effect(
  Verifier,
  Effect.gen(function* () {
    const { client } = yield* EvmChain
    const facilitator = new x402Facilitator().register(
      NETWORK,
      new ExactEvmScheme({
        getAddresses: () => [zeroAddress],
        readContract: client.readContract,
        verifyTypedData: (args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]),
        getCode: client.getCode,
        writeContract: () => Promise.reject(refused("writeContract")),
        sendTransaction: () => Promise.reject(refused("sendTransaction")),
        waitForTransactionReceipt: () => Promise.reject(refused("waitForTransactionReceipt"))
      })
    )
    return {
      verify: (payload, requirements) =>
        Effect.tryPromise({
          try: () => facilitator.verify(payload, requirements),
          catch: (cause) => new ChainUnavailable({ operation: "payment verification", cause })
        })
    }
  })
)

/** An x402 facilitator's /verify (X402_FACILITATOR_URL). */
export const VerifierFacilitator = Layer.effect(
  Verifier,
  Effect.gen(function* () {
    const settings = yield* AppConfig
    const url = Option.getOrThrowWith(settings.x402.facilitatorUrl, () => new Error("X402_FACILITATOR_URL is not set"))
    const facilitator = new HTTPFacilitatorClient({ url, timeoutMs: 15_000 })
    return {
      verify: (payload, requirements) =>
        Effect.tryPromise({ try: () => facilitator.verify(payload, requirements), catch: (cause) => cause }).pipe(
          // A facilitator answers an invalid payment with a 4xx carrying the VerifyResponse.
          Effect.catchAll((cause) =>
            cause instanceof VerifyError && cause.invalidReason !== undefined
              ? Effect.succeed({ isValid: false, invalidReason: cause.invalidReason, invalidMessage: cause.invalidMessage } satisfies VerifyResponse)
              : Effect.fail(new ChainUnavailable({ operation: "facilitator /verify", cause }))
          )
        )
    }
  })
)
