/** A real x402 facilitator on 127.0.0.1 for tests: the official x402Facilitator with the exact-EVM scheme, settling on the local chain. */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { x402Facilitator } from "@x402/core/facilitator"
import { toFacilitatorEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/facilitator"
import { Effect } from "effect"
import { createWalletClient, http, publicActions } from "viem"
import { paymentChain } from "../../src/x402/EvmChain.ts"
import { NETWORK } from "../../src/x402/protocol.ts"
import type { LocalChain } from "../support/chain.ts"
import { closeServer, readBody as body } from "../support/http.ts"


/**
 * How /settle misbehaves: `send-then-time-out` broadcasts the transfer, then its RPC "times out" (the facilitator
 * answers an error with an empty hash); `pending-without-hash` answers settlement_pending without the hash.
 */
export type FacilitatorMode = "normal" | "send-then-time-out" | "pending-without-hash"

export interface TestFacilitator {
  readonly url: string
  readonly settleCalls: () => number
  readonly setMode: (mode: FacilitatorMode) => void
}

/** Starts the facilitator with the chain's facilitator wallet; its receipt wait is bounded by `confirmationTimeoutMs`. */
export const startFacilitator = (chain: LocalChain, confirmationTimeoutMs: number) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const wallet = createWalletClient({
        account: chain.accounts.facilitator,
        chain: paymentChain(chain.rpcUrl),
        transport: http(chain.rpcUrl)
      }).extend(publicActions)
      let mode: FacilitatorMode = "normal"
      const signer = toFacilitatorEvmSigner(
        {
          address: chain.accounts.facilitator.address,
          readContract: (args) => wallet.readContract(args as Parameters<typeof wallet.readContract>[0]),
          verifyTypedData: (args) => wallet.verifyTypedData(args as Parameters<typeof wallet.verifyTypedData>[0]),
          writeContract: async (args) => {
            const hash = await wallet.writeContract(args as Parameters<typeof wallet.writeContract>[0])
            if (mode === "send-then-time-out") throw new Error("The request took too long to respond.")
            return hash
          },
          sendTransaction: (args) => wallet.sendTransaction(args),
          waitForTransactionReceipt: (args) => wallet.waitForTransactionReceipt(args),
          getCode: (args) => wallet.getCode(args)
        },
        { confirmationTimeoutMs }
      )
      const facilitator = new x402Facilitator().register(NETWORK, new ExactEvmScheme(signer))
      let settles = 0
      const server = createServer((req, res) => {
        body(req)
          .then(async (text) => {
            const reply = (status: number, value: unknown) => {
              res.writeHead(status, { "content-type": "application/json" })
              res.end(JSON.stringify(value))
            }
            if (req.method === "GET" && req.url === "/supported") return reply(200, facilitator.getSupported())
            const { paymentPayload, paymentRequirements } = JSON.parse(text)
            if (req.url === "/verify") return reply(200, await facilitator.verify(paymentPayload, paymentRequirements))
            if (req.url === "/settle") {
              settles++
              const settled = await facilitator.settle(paymentPayload, paymentRequirements)
              const pendingWithoutHash = mode === "pending-without-hash" && settled.errorReason === "settlement_pending"
              return reply(200, pendingWithoutHash ? { ...settled, transaction: "" } : settled)
            }
            reply(404, { error: "not found" })
          })
          .catch((e: unknown) => {
            res.writeHead(500, { "content-type": "application/json" })
            res.end(JSON.stringify({ error: String(e) }))
          })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      return {
        server,
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        settleCalls: () => settles,
        setMode: (next: FacilitatorMode) => {
          mode = next
        }
      }
    }),
    ({ server }) => Effect.promise(() => closeServer(server))
  ).pipe(Effect.map(({ url, settleCalls, setMode }): TestFacilitator => ({ url, settleCalls, setMode })))
