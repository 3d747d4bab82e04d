/** `GET /sandbox/wallets/{address}`: a wallet's balance on the memory chain, so sandbox payers can watch their USDC move. */
import { HttpLayerRouter, HttpRouter, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { formatUnits, getAddress, isAddress } from "viem"
import { MemoryChain } from "./MemoryChain.ts"
import { NETWORK } from "./protocol.ts"

/** USDC has 6 decimals; the amount is shown with all of them ("100.000000"). */
const usdc = (units: bigint) => {
  const [whole, fraction = ""] = formatUnits(units, 6).split(".")
  return `${whole}.${fraction.padEnd(6, "0")}`
}

/**
 * 200 `{ address, network, asset, usdc, units }` (`units` in 6-decimal base units as a decimal string; a wallet
 * never seen holds 100 USDC); 400 `invalid_request` when the path does not hold a 20-byte hex address.
 */
export const WalletsRoute = HttpLayerRouter.use((router) =>
  Effect.gen(function* () {
    const chain = yield* MemoryChain
    yield* router.add("GET", "/sandbox/wallets/:address", () =>
      Effect.gen(function* () {
        const { address } = yield* HttpRouter.params
        if (address === undefined || !isAddress(address, { strict: false })) {
          return HttpServerResponse.unsafeJson(
            { _tag: "InvalidRequest", error: { code: "invalid_request", message: "the path must name a wallet: 0x followed by 40 hex digits" } },
            { status: 400 }
          )
        }
        const units = yield* chain.balanceOf(getAddress(address))
        return HttpServerResponse.unsafeJson({ address: getAddress(address), network: NETWORK, asset: chain.asset, usdc: usdc(units), units: units.toString() })
      })
    )
  })
)
