/** The credits feature assembled: its services, its HttpApi group with the key middleware, and its raw routes. */
import { Layer } from "effect"
import { CreditCapacity } from "../limits/Capacity.ts"
import { Checkout } from "./Checkout.ts"
import { CreditFunding } from "./CreditFunding.ts"
import { Feedback } from "./Feedback.ts"
import { CreditKeyAuthLive, CreditsHttpLive } from "./http.ts"
import { KeyFingerprints } from "./keys.ts"
import { Ledger } from "./Ledger.ts"
import type { Processor } from "./Processor.ts"
import { MemoryCards, ProcessorMemory } from "./ProcessorMemory.ts"
import { ProcessorFromConfig } from "./ProcessorStripe.ts"
import { CreditsRoutes } from "./routes.ts"
import { SandboxCheckoutRoutes } from "./sandbox.ts"
import { Webhooks } from "./webhooks.ts"

/** Every credits service on the given card processor; needs AppConfig, SqlClient and what the processor needs. */
export const CreditsServicesWith = <P, E, R>(processor: Layer.Layer<P | Processor, E, R>) =>
  Layer.mergeAll(Webhooks.Default, CreditFunding.Default, Feedback.Default, CreditCapacity.Live).pipe(
    Layer.provideMerge(Checkout.Default),
    Layer.provideMerge(Layer.mergeAll(Ledger.Default, KeyFingerprints.Default, processor))
  )

/** Every credits service with the processor the settings choose (Stripe, or Disabled); needs AppConfig and SqlClient. */
export const CreditsServicesLive = CreditsServicesWith(ProcessorFromConfig)

/**
 * Every credits service on the in-memory processor (the sandbox), MemoryCards included; needs AppConfig (test
 * mode: its sessions are `cs_test_…`) and SqlClient. Mount SandboxCheckoutRoutes beside it.
 */
export const CreditsServicesMemory = CreditsServicesWith(ProcessorMemory)

/** The credits HttpApi group and its Bearer middleware, ready for `HttpLayerRouter.addHttpApi(MorselApi)`. */
export const CreditsApiLive = CreditsHttpLive.pipe(Layer.provide(CreditKeyAuthLive), Layer.provideMerge(CreditKeyAuthLive))

export { CreditFunding, CreditKeyAuthLive, CreditsHttpLive, CreditsRoutes, MemoryCards, ProcessorMemory, SandboxCheckoutRoutes }
