/** Who is calling, by network address: the socket's peer, or behind a trusted proxy the address it forwards for. */
import { BlockList, isIP } from "node:net"
import { Option } from "effect"
import { normaliseAddress, parseProxyEntry } from "../config.ts"

/**
 * One address as a peer or an `X-Forwarded-For` hop gives it, without what does not name the host: a port
 * (`1.2.3.4:5678`, `[2001:db8::1]:443`), brackets, an IPv6 zone (`fe80::1%eth0`); an IPv4-mapped IPv6 address as
 * its IPv4 address. Anything that is not an address is returned trimmed and lower-cased, as it came.
 */
export const hostAddress = (entry: string): string => {
  const trimmed = entry.trim()
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(trimmed)
  const v4WithPort = /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(trimmed)
  const bare = bracketed?.[1] ?? v4WithPort?.[1] ?? trimmed
  return normaliseAddress(bare.replace(/%[^%]*$/, ""))
}

/** The eight 16-bit groups of an IPv6 address (`isIP` said 6), an embedded IPv4 tail included. */
const ipv6Groups = (address: string): Array<number> => {
  const v4Tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address)
  const hex = v4Tail
    ? `${address.slice(0, v4Tail.index)}${((Number(v4Tail[1]) << 8) | Number(v4Tail[2])).toString(16)}:${((Number(v4Tail[3]) << 8) | Number(v4Tail[4])).toString(16)}`
    : address
  const [head = "", tail] = hex.split("::")
  const parts = (text: string) => (text === "" ? [] : text.split(":").map((group) => Number.parseInt(group, 16)))
  const front = parts(head)
  const back = tail === undefined ? [] : parts(tail)
  return [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back]
}

/**
 * The client as the per-address limits count it: an IPv4 address as it is; an IPv6 address by its /64 network
 * (`2001:db8:0:1::/64`), the block one subscriber's host picks addresses from, so rotating inside it is one client.
 */
export const clientOf = (address: string): string => {
  const host = hostAddress(address)
  if (isIP(host) !== 6) return host
  const prefix = ipv6Groups(host)
    .slice(0, 4)
    .map((group) => group.toString(16))
  return `${prefix.join(":")}::/64`
}

/** What a client's address is read from: a request of the HttpApi stack, or the same facts of a plain Node one. */
export interface Peer {
  readonly remoteAddress: Option.Option<string>
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
}

/**
 * The client of a request, as `clientOf` counts it. With no trusted proxies it is the socket's peer. When the peer
 * is a trusted proxy, `X-Forwarded-For` is read from its right end (the hop our proxy added) leftwards, skipping
 * trusted proxies: the first address not trusted is the client, so a client cannot choose its address by sending
 * the header itself.
 */
export const makeClientAddress = (trustedProxies: ReadonlyArray<string>) => {
  const trusted = new BlockList()
  for (const entry of trustedProxies) {
    const parsed = parseProxyEntry(entry)
    if (Option.isNone(parsed)) continue
    const { address, prefix } = parsed.value
    const type = isIP(address) === 6 ? "ipv6" : "ipv4"
    if (Option.isSome(prefix)) trusted.addSubnet(address, prefix.value, type)
    else trusted.addAddress(address, type)
  }
  const isTrusted = (address: string) => {
    const family = isIP(address)
    return family !== 0 && trusted.check(address, family === 6 ? "ipv6" : "ipv4")
  }
  const find = (request: Peer): string => {
    const peer = hostAddress(Option.getOrElse(request.remoteAddress, () => "unknown"))
    if (trustedProxies.length === 0 || !isTrusted(peer)) return peer
    const forwarded = String(request.headers["x-forwarded-for"] ?? "")
    const hops = forwarded
      .split(",")
      .map(hostAddress)
      .filter((hop) => hop.length > 0)
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]
      if (hop !== undefined && !isTrusted(hop)) return hop
    }
    return hops[0] ?? peer
  }
  return (request: Peer): string => clientOf(find(request))
}
