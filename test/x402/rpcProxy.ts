/** A JSON-RPC pass-through on 127.0.0.1 in front of the local chain that counts the calls of each method. */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"
import { closeServer, readBody as body } from "../support/http.ts"


export interface RpcProxy {
  readonly url: string
  /** How many calls of `method` went through since the start. */
  readonly calls: (method: string) => number
}

export const startRpcProxy = (target: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const counts = new Map<string, number>()
      const server = createServer((req, res) => {
        body(req)
          .then(async (text) => {
            const parsed: unknown = JSON.parse(text)
            for (const call of Array.isArray(parsed) ? parsed : [parsed]) {
              const method = typeof call === "object" && call !== null && "method" in call ? String(call.method) : "?"
              counts.set(method, (counts.get(method) ?? 0) + 1)
            }
            const answer = await fetch(target, { method: "POST", headers: { "content-type": "application/json" }, body: text })
            res.writeHead(answer.status, { "content-type": "application/json" })
            res.end(await answer.text())
          })
          .catch((e: unknown) => {
            res.writeHead(502, { "content-type": "application/json" })
            res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32603, message: String(e) } }))
          })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls: (method: string) => counts.get(method) ?? 0 }
    }),
    ({ server }) => Effect.promise(() => closeServer(server))
  ).pipe(Effect.map(({ url, calls }): RpcProxy => ({ url, calls })))
