/** The credits feature assembled: its services, its HttpApi group with the key middleware, and its raw routes. */
import { Layer } from "effect"
import { CreditCapacityLive } from "../limits/Capacity.ts"
import { CheckoutLive } from "./Checkout.ts"
import { CreditFunding, CreditFundingLive } from "./CreditFunding.ts"
import { FeedbackLive } from "./Feedback.ts"
import { CreditKeyAuthLive, CreditsHttpLive } from "./http.ts"
import { KeyFingerprintsLive } from "./keys.ts"
import { LedgerLive } from "./Ledger.ts"
import type { Processor } from "./Processor.ts"
import { MemoryCards, ProcessorMemory } from "./ProcessorMemory.ts"
import { ProcessorLive } from "./ProcessorStripe.ts"
import { CreditsRoutes } from "./routes.ts"
import { SandboxCheckoutRoutes } from "./sandbox.ts"
import { WebhooksLive } from "./webhooks.ts"

/** Every credits service on the given card processor; needs AppConfig, SqlClient and what the processor needs. */
export const CreditsServicesWith = <P, E, R>(processor: Layer.Layer<P | Processor, E, R>) =>
  Layer.mergeAll(WebhooksLive, CreditFundingLive, FeedbackLive).pipe(
    Layer.provideMerge(CreditCapacityLive),
    Layer.provideMerge(CheckoutLive),
    Layer.provideMerge(Layer.mergeAll(LedgerLive, KeyFingerprintsLive, processor))
  )

/** Every credits service with the processor the settings choose (Stripe, or Disabled); needs AppConfig and SqlClient. */
export const CreditsServicesLive = CreditsServicesWith(ProcessorLive)

/**
 * Every credits service on the in-memory processor (the sandbox), MemoryCards included; needs AppConfig (test
 * mode: its sessions are `cs_test_…`) and SqlClient. Mount SandboxCheckoutRoutes beside it.
 */
export const CreditsServicesMemory = CreditsServicesWith(ProcessorMemory)

/** The credits HttpApi group and its Bearer middleware, ready for `HttpLayerRouter.addHttpApi(MorselApi)`. */
export const CreditsApiLive = CreditsHttpLive.pipe(Layer.provide(CreditKeyAuthLive), Layer.provideMerge(CreditKeyAuthLive))

export { CreditFunding, CreditKeyAuthLive, CreditsHttpLive, CreditsRoutes, MemoryCards, ProcessorMemory, SandboxCheckoutRoutes }
