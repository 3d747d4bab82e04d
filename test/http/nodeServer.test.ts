// The Node server under the service answers "starting" until the application attaches, then steps aside.
import type { ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, it } from "vitest"
import { FrontServer } from "../../src/http/nodeServer.ts"
import { closeServer, errorCode, send } from "../support/http.ts"

describe("FrontServer", () => {
  it("503 starting with Retry-After while no application listens; the application's answers once it does", async () => {
    const server = new FrontServer()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    try {
      const early = await send(`${url}/health`)
      expect(early.status).toBe(503)
      expect(early.headers.get("retry-after")).toBe("1")
      expect(errorCode(early)).toBe("starting")
      const application = (_request: unknown, response: ServerResponse) => response.end("ready")
      server.on("request", application)
      const ready = await send(`${url}/health`)
      expect(ready.status).toBe(200)
      expect(ready.text).toBe("ready")
      // Detached again on shutdown: "starting or stopping", still an answer.
      server.off("request", application)
      expect((await send(`${url}/v1/analyze`, { body: {} })).status).toBe(503)
    } finally {
      await closeServer(server)
    }
  })
})
