/** Whether this server is the sandbox; off unless the sandbox composition turns it on. */
import { Context } from "effect"

export class SandboxMode extends Context.Reference<SandboxMode>()("morsel/SandboxMode", { defaultValue: () => false }) {}
