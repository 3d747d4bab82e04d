/** The credits feature assembled: its services, its HttpApi group with the key middleware, and its raw routes. */
import { Layer } from "effect"
import { CreditCapacity } from "../limits/Capacity.ts"
import { Checkout } from "./Checkout.ts"
import { CreditFunding } from "./CreditFunding.ts"
import { Feedback } from "./Feedback.ts"
import { CreditKeyAuthLive, CreditsHttpLive } from "./http.ts"
import { KeyFingerprints } from "./keys.ts"
import { Ledger } from "./Ledger.ts"
import { Processor } from "./Processor.ts"
import { CreditsRoutes } from "./routes.ts"

/** Every credits service; needs AppConfig and SqlClient. */
export const CreditsServicesLive = Layer.mergeAll(Checkout.Default, Feedback.Default, CreditFunding.Default, CreditCapacity.Live).pipe(
  Layer.provideMerge(Layer.mergeAll(Ledger.Default, KeyFingerprints.Default, Processor.layer))
)

/** The credits HttpApi group and its Bearer middleware, ready for `HttpLayerRouter.addHttpApi(MorselApi)`. */
export const CreditsApiLive = CreditsHttpLive.pipe(Layer.provide(CreditKeyAuthLive), Layer.provideMerge(CreditKeyAuthLive))

export { CreditFunding, CreditKeyAuthLive, CreditsHttpLive, CreditsRoutes }
