// The self-settlement wallet's ETH on the local chain: the gauge shows what the chain says it holds, and a balance
// under X402_SETTLER_LOW_BALANCE_WEI is a warning naming the wallet and the setting.
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Logger, Metric } from "effect"
import { AppConfig, AppConfigFromEnv } from "../../src/config.ts"
import { settlerBalance } from "../../src/observability/metrics.ts"
import { EvmChainLive } from "../../src/x402/EvmChain.ts"
import { readSettlerBalance } from "../../src/x402/SettlerBalance.ts"
import { Chain } from "../support/chain.ts"
import { x402Env } from "../support/x402.ts"

const OnLocalChain = Layer.unwrapEffect(
  Effect.map(Chain, (chain) => EvmChainLive.pipe(Layer.provideMerge(AppConfigFromEnv(x402Env(chain)).pipe(Layer.orDie))))
).pipe(Layer.provideMerge(Chain.layer({ payers: 1 })))

/** Runs `effect`, with the lines it logs. */
const logged = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      lines.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
    })
    const result = yield* Effect.provide(effect, Logger.add(logger))
    return { result, lines }
  })

describe("the settler wallet's balance", () => {
  layer(OnLocalChain, { excludeTestServices: true, timeout: 180_000 })("on the local chain", (it) => {
    it.effect("is the gauge's value; under the threshold it is a warning naming the wallet and the setting", () =>
      Effect.gen(function* () {
        const chain = yield* Chain
        const settler = chain.accounts.settler.address
        const held = yield* Effect.promise(() => chain.publicClient.getBalance({ address: settler }))
        expect(held).toBeGreaterThan(0n)

        const low = yield* logged(readSettlerBalance(settler, held + 1n, true))
        expect(low.result._tag).toBe("Some")
        expect((yield* Metric.value(settlerBalance)).value).toBe(Number(held))
        expect(low.lines.filter((line) => line.startsWith("WARN"))).toEqual([
          expect.stringMatching(new RegExp(`^WARN the x402 settler wallet ${settler} holds .* ETH, under X402_SETTLER_LOW_BALANCE_WEI`))
        ])

        const enough = yield* logged(readSettlerBalance(settler, held, true))
        expect(enough.lines.filter((line) => line.startsWith("WARN"))).toEqual([])
      }), 120_000)

    it.effect("the threshold defaults to 0.001 ETH", () =>
      Effect.map(AppConfig, (settings) => expect(settings.x402.settlerLowBalanceWei).toBe(1_000_000_000_000_000n)))
  })
})
