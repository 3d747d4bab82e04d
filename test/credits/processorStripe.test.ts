// The processor behaviour suite against Stripe: the real SDK talking to the local fake Stripe API.
import { stripeUnderTest } from "./drivers.ts"
import { processorSuite } from "./processorSuite.ts"

processorSuite("stripe (SDK against the fake Stripe API)", stripeUnderTest)
