/**
 * What integrators import from `morsel/testing`: the sandbox (in-process, or as Effect layers) and the scripted
 * vision model, so a test suite can run morsel beside itself with no account and no network.
 */
import { createServer } from "node:net"
import { Effect, Exit, Layer, Scope } from "effect"
import { LoggingLive } from "./logging.ts"
import { SandboxLive, sandboxConfig } from "./sandbox/Sandbox.ts"

export {
  answerFor,
  mealOf,
  NO_FOOD,
  SANDBOX_MEALS,
  type SandboxMeal,
  SCRIPTED_MODEL,
  ScriptStep,
  VisionModelScripted,
  VisionScript
} from "./analysis/VisionModelScripted.ts"
export { type ModelAnswer, VisionFailure, VisionModel, type VisionInput } from "./analysis/VisionModel.ts"
export { SANDBOX_PAY_TO, SandboxLive, sandboxConfig, sandboxParts } from "./sandbox/Sandbox.ts"
export { Scenario } from "./sandbox/scenario.ts"
export { type Parts, serveWith } from "./server.ts"

/** A running in-process sandbox. */
export interface RunningSandbox {
  /** Its base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string
  /** Stops it; everything it held is gone. */
  readonly close: () => Promise<void>
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer()
    probe.once("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      probe.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/**
 * Starts the sandbox in this process on a free 127.0.0.1 port (or `port`). `env` holds optional sandbox settings
 * (LOG_LEVEL, ANALYSIS_TIMEOUT_MS, LIMIT_…); by default it logs warnings only. It resolves once the sandbox answers
 * and its food index is built: a first analysis starts at once.
 */
export const startSandbox = async (options: { readonly port?: number; readonly env?: Readonly<Record<string, string>> } = {}): Promise<RunningSandbox> => {
  const port = options.port ?? (await freePort())
  const env = { LOG_LEVEL: "warning", ...options.env, HOST: "127.0.0.1", PORT: String(port) }
  const scope = Effect.runSync(Scope.make())
  const close = () => Effect.runPromise(Scope.close(scope, Exit.void))
  // The banner is for people starting it by hand; a test suite wants quiet.
  const logged = SandboxLive(env, { banner: false, indexBuilt: true }).pipe(Layer.provide(LoggingLive.pipe(Layer.provide(sandboxConfig(env)))))
  await Effect.runPromise(Scope.extend(Layer.build(logged), scope)).catch(async (error: unknown) => {
    await close()
    throw error
  })
  return { url: `http://127.0.0.1:${port}`, close }
}
