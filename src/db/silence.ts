/**
 * Sockets to PostgreSQL that give up on a server gone silent: once a statement is sent, a connection that hears
 * nothing for the allowed time is destroyed, so its query fails, its transaction dies with it on the server, and
 * no request waits on a partitioned network for ever.
 */
import { Socket } from "node:net"

/** PostgreSQL's ReadyForQuery message ('Z', length 5, transaction status): the server finished what it was sent. */
const endsWithReadyForQuery = (chunk: Buffer) => {
  const n = chunk.length
  return (
    n >= 6 &&
    chunk[n - 6] === 0x5a &&
    chunk[n - 5] === 0 &&
    chunk[n - 4] === 0 &&
    chunk[n - 3] === 0 &&
    chunk[n - 2] === 5 &&
    (chunk[n - 1] === 0x49 || chunk[n - 1] === 0x54 || chunk[n - 1] === 0x45)
  )
}

/**
 * A socket factory for the `pg` driver's `stream` option. The clock runs while an answer is awaited (from a write
 * until the server says it is ready again) and restarts with every byte heard, so a long result keeps it alive.
 * Behind TLS the watch may see no bytes at all, and then it never fires. A message the server sends unasked to an
 * idle connection (a notice) starts the clock too; that connection is dropped and the pool opens another.
 */
export const silenceLimitedSocket = (limitMs: number) => (): Socket => {
  const socket = new Socket()
  let timer: NodeJS.Timeout | undefined
  const disarm = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
  }
  const arm = () => {
    disarm()
    timer = setTimeout(() => socket.destroy(new Error(`the database sent nothing for ${limitMs} ms`)), limitMs)
    timer.unref()
  }
  // Node puts the prototype's write back when a socket connects, so the watch goes on once it has.
  socket.once("connect", () => {
    const write = socket.write.bind(socket)
    socket.write = ((...args: Parameters<Socket["write"]>) => {
      arm()
      return write(...args)
    }) as Socket["write"]
  })
  socket.on("data", (chunk: Buffer) => (endsWithReadyForQuery(chunk) ? disarm() : arm()))
  socket.on("close", disarm)
  return socket
}
