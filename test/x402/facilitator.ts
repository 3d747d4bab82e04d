/** A real x402 facilitator on 127.0.0.1 for tests: the official x402Facilitator with the exact-EVM scheme, settling on the local chain. */
import { createServer, type IncomingMessage } from "node:http"
import type { AddressInfo } from "node:net"
import { x402Facilitator } from "@x402/core/facilitator"
import { toFacilitatorEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/facilitator"
import { Effect } from "effect"
import { createWalletClient, http, publicActions } from "viem"
import { paymentChain } from "../../src/x402/EvmChain.ts"
import { NETWORK } from "../../src/x402/protocol.ts"
import type { LocalChain } from "../support/chain.ts"

const body = (req: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

export interface TestFacilitator {
  readonly url: string
  readonly settleCalls: () => number
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
      const signer = toFacilitatorEvmSigner(
        {
          address: chain.accounts.facilitator.address,
          readContract: (args) => wallet.readContract(args as Parameters<typeof wallet.readContract>[0]),
          verifyTypedData: (args) => wallet.verifyTypedData(args as Parameters<typeof wallet.verifyTypedData>[0]),
          writeContract: (args) => wallet.writeContract(args as Parameters<typeof wallet.writeContract>[0]),
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
              return reply(200, await facilitator.settle(paymentPayload, paymentRequirements))
            }
            reply(404, { error: "not found" })
          })
          .catch((e: unknown) => {
            res.writeHead(500, { "content-type": "application/json" })
            res.end(JSON.stringify({ error: String(e) }))
          })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, settleCalls: () => settles }
    }),
    ({ server }) =>
      Effect.promise(
        () =>
          new Promise<void>((resolve) => {
            server.close(() => resolve())
            server.closeAllConnections()
          })
      )
  ).pipe(Effect.map(({ url, settleCalls }): TestFacilitator => ({ url, settleCalls })))
