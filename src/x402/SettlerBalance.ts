/**
 * The self-settlement wallet's ETH (X402_SETTLER_PRIVATE_KEY), which pays every transfer's gas: read at start and
 * every minute, shown as the `morsel_x402_settler_balance_wei` gauge, and a warning logged while it is under
 * X402_SETTLER_LOW_BALANCE_WEI (at the first low reading, then hourly), before settlements fail for want of gas.
 */
import { Effect, Metric, Option, Ref, Schedule } from "effect"
import { type Address, formatEther } from "viem"
import { AppConfig } from "../config.ts"
import { settlerBalance } from "../observability/metrics.ts"
import { EvmChain } from "./EvmChain.ts"

const READ_EVERY = "1 minute"
/** While low, the warning comes again after this many readings (an hour). */
const WARN_EVERY = 60

/**
 * Reads the wallet's balance once: sets the gauge and, when it is under `low`, logs the warning if `warn` says so.
 * Returns the balance (none when the chain could not be read, which a later reading retries).
 */
export const readSettlerBalance = (address: Address, low: bigint, warn: boolean) =>
  Effect.flatMap(EvmChain, (chain) =>
    Effect.tryPromise(() => chain.client.getBalance({ address })).pipe(
      Effect.tap((wei) => Metric.set(settlerBalance, Number(wei))),
      Effect.tap((wei) =>
        wei < low && warn
          ? Effect.logWarning(
              `the x402 settler wallet ${address} holds ${formatEther(wei)} ETH, under X402_SETTLER_LOW_BALANCE_WEI (${formatEther(low)} ETH): send it ETH on Base, or settlements will fail for want of gas`
            ).pipe(Effect.annotateLogs({ settler: address, balance_wei: wei.toString(), low_balance_wei: low.toString() }))
          : Effect.void
      ),
      Effect.option
    )
  )

/** Watches the settler wallet at `address` for as long as the scope (the server) lasts. */
export const watchSettlerBalance = (address: Address) =>
  Effect.gen(function* () {
    const low = (yield* AppConfig).x402.settlerLowBalanceWei
    // Readings since the last warning; the first low reading warns.
    const sinceWarning = yield* Ref.make(WARN_EVERY)
    const reading = Effect.gen(function* () {
      const since = yield* Ref.get(sinceWarning)
      const wei = yield* readSettlerBalance(address, low, since >= WARN_EVERY)
      const isLow = Option.exists(wei, (balance) => balance < low)
      yield* Ref.set(sinceWarning, !isLow ? WARN_EVERY : since >= WARN_EVERY ? 1 : since + 1)
    })
    yield* Effect.forkScoped(Effect.repeat(reading, Schedule.spaced(READ_EVERY)))
  })
