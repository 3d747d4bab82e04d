/** A local OTLP/HTTP trace receiver for tests: keeps the JSON bodies posted to /v1/traces and reads their spans. */
import { createServer, type Server as NodeServer } from "node:http"
import { Effect, Ref } from "effect"
import { closeServer, readBody } from "./http.ts"

export const otlpReceiver = Effect.acquireRelease(
  Effect.gen(function* () {
    const bodies = yield* Ref.make<ReadonlyArray<string>>([])
    const server: NodeServer = createServer(async (req, res) => {
      const body = await readBody(req)
      if (req.url === "/v1/traces") Effect.runSync(Ref.update(bodies, (all) => [...all, body]))
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
    yield* Effect.async<void>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.void))
    })
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    return { server, url: `http://127.0.0.1:${port}`, bodies }
  }),
  ({ server }) => Effect.promise(() => closeServer(server))
)

export interface OtlpSpan {
  readonly name: string
  readonly traceId: string
  readonly parentSpanId?: string
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: unknown }>
}

/** Every span of the received bodies (OTLP JSON). */
export const spansOf = (bodies: ReadonlyArray<string>): Array<OtlpSpan> =>
  bodies.flatMap((body) => {
    const parsed = JSON.parse(body) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<OtlpSpan> }> }> }
    return parsed.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))
  })
