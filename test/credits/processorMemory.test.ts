// The processor behaviour suite against the in-memory processor.
import { memoryUnderTest } from "./drivers.ts"
import { processorSuite } from "./processorSuite.ts"

processorSuite("memory", memoryUnderTest)
