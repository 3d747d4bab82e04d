/**
 * A TCP proxy of ours in front of PostgreSQL that can cut, stall, slow down and refuse connections, so tests
 * take the database away from the service without touching the machine's own server.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net"

export type ProxyMode = "pass" | "stall" | "refuse"

export interface PgProxy {
  /** The database URL through the proxy: `target` with its host and port replaced. */
  readonly url: (target: string) => string
  readonly port: number
  /** Forward again: stalled connections move on, new ones are accepted and connected. */
  readonly pass: () => void
  /** Keep every connection open but move no byte either way, as a partitioned network does. */
  readonly stall: () => void
  /** Reset every new connection at once, as a database that is down does (existing ones stay until `cut`). */
  readonly refuse: () => void
  /** Reset every open connection now. */
  readonly cut: () => number
  /** Hold each chunk this long in each direction (0: none): slow queries without touching the server. */
  readonly delay: (ms: number) => void
  /**
   * The next time a client sends a statement containing `text`, passes it on, then cuts every connection and refuses
   * new ones (as `refuse`): the database runs the statement (and commits it, if it is one of its own), its answer is
   * lost. Resolves when that happened.
   */
  readonly cutAfter: (text: string) => Promise<void>
  readonly mode: () => ProxyMode
  readonly stats: () => { readonly accepted: number; readonly refused: number; readonly cut: number; readonly open: number }
  readonly close: () => Promise<void>
}

interface Pair {
  readonly client: Socket
  readonly upstream: Socket
}

export const startPgProxy = async (target: string): Promise<PgProxy> => {
  const upstreamUrl = new URL(target)
  const upstreamHost = upstreamUrl.hostname
  const upstreamPort = Number(upstreamUrl.port || 5432)
  const pairs = new Set<Pair>()
  let mode: ProxyMode = "pass"
  let delayMs = 0
  const counts = { accepted: 0, refused: 0, cut: 0 }

  let cutOn: { readonly text: string; readonly done: () => void } | undefined
  /** The database's answers are dropped (from the statement `cutAfter` waited for until the connections are cut). */
  let deaf = false

  const pipe = (from: Socket, to: Socket, fromClient: boolean) => {
    from.on("data", (chunk: Buffer) => {
      if (fromClient && cutOn !== undefined && chunk.includes(cutOn.text)) {
        const { done } = cutOn
        cutOn = undefined
        mode = "refuse"
        deaf = true
        // Written, and given a moment to arrive, before every connection goes.
        to.write(chunk, () =>
          setTimeout(() => {
            cut()
            done()
          }, 20)
        )
        return
      }
      if (!fromClient && deaf) return
      if (delayMs === 0) to.write(chunk)
      else setTimeout(() => to.writable && to.write(chunk), delayMs)
    })
  }

  const server: Server = createServer((client) => {
    if (mode === "refuse") {
      counts.refused++
      client.resetAndDestroy()
      return
    }
    counts.accepted++
    const upstream = createConnection({ host: upstreamHost, port: upstreamPort })
    const pair = { client, upstream }
    pairs.add(pair)
    if (mode === "stall") {
      client.pause()
      upstream.pause()
    }
    pipe(client, upstream, true)
    pipe(upstream, client, false)
    const end = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on("close", end)
    upstream.on("close", end)
    client.on("error", end)
    upstream.on("error", end)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0

  const cut = () => {
    const n = pairs.size
    counts.cut += n
    for (const { client, upstream } of [...pairs]) {
      client.resetAndDestroy()
      upstream.destroy()
    }
    pairs.clear()
    return n
  }

  return {
    port,
    url: (t) => {
      const u = new URL(t)
      u.hostname = "127.0.0.1"
      u.port = String(port)
      return u.toString()
    },
    pass: () => {
      mode = "pass"
      deaf = false
      for (const { client, upstream } of pairs) {
        client.resume()
        upstream.resume()
      }
    },
    stall: () => {
      mode = "stall"
      for (const { client, upstream } of pairs) {
        client.pause()
        upstream.pause()
      }
    },
    refuse: () => {
      mode = "refuse"
    },
    cut,
    delay: (ms) => {
      delayMs = ms
    },
    cutAfter: (text) => new Promise<void>((done) => (cutOn = { text, done })),
    mode: () => mode,
    stats: () => ({ ...counts, open: pairs.size }),
    close: () =>
      new Promise<void>((resolve) => {
        cut()
        server.close(() => resolve())
      })
  }
}
