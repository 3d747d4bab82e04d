/** A JSON-RPC proxy in front of the local chain that can go down, answer slowly or answer errors, for the chain's faults. */
import { createServer, type Server } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { closeServer, readBody } from "../support/http.ts"

export type RpcMode =
  | { readonly kind: "pass" }
  /** Every connection is reset without an answer. */
  | { readonly kind: "down" }
  /** Every call waits this long before it is forwarded. */
  | { readonly kind: "slow"; readonly ms: number }
  /** Every call is answered with HTTP 503, as an overloaded provider does. */
  | { readonly kind: "error" }

export interface RpcFaults {
  readonly url: string
  readonly set: (mode: RpcMode) => void
  /** Calls of `method` seen since the start (answered or not). */
  readonly calls: (method: string) => number
  /** Raw transactions the service sent, in order. */
  readonly sent: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

const methodsOf = (parsed: unknown): ReadonlyArray<{ method: string; params: ReadonlyArray<unknown> }> =>
  (Array.isArray(parsed) ? parsed : [parsed]).map((call: unknown) => {
    const record = typeof call === "object" && call !== null ? (call as Record<string, unknown>) : {}
    return { method: String(record["method"] ?? "?"), params: Array.isArray(record["params"]) ? record["params"] : [] }
  })

export const startRpcFaults = async (target: string): Promise<RpcFaults> => {
  let mode: RpcMode = { kind: "pass" }
  const counts = new Map<string, number>()
  const sent: Array<string> = []
  const server: Server = createServer((req, res) => {
    readBody(req)
      .then(async (text) => {
        const calls = methodsOf(JSON.parse(text))
        for (const { method, params } of calls) {
          counts.set(method, (counts.get(method) ?? 0) + 1)
          if (method === "eth_sendRawTransaction" && typeof params[0] === "string") sent.push(params[0])
        }
        const now = mode
        if (now.kind === "down") return (req.socket as Socket).resetAndDestroy()
        if (now.kind === "error") {
          res.writeHead(503, { "content-type": "text/plain" })
          return res.end("upstream unavailable")
        }
        if (now.kind === "slow") await new Promise((resolve) => setTimeout(resolve, now.ms))
        const answer = await fetch(target, { method: "POST", headers: { "content-type": "application/json" }, body: text })
        res.writeHead(answer.status, { "content-type": "application/json" })
        res.end(await answer.text())
      })
      .catch(() => {
        if (!res.headersSent) res.writeHead(502).end()
      })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    set: (next) => {
      mode = next
    },
    calls: (method) => counts.get(method) ?? 0,
    sent,
    close: () => closeServer(server)
  }
}
