/** Who is calling, by network address: the socket's peer, or behind a trusted proxy the address it forwards for. */
import { BlockList, isIP } from "node:net"
import type { HttpServerRequest } from "@effect/platform"
import { Option } from "effect"
import { normaliseAddress, parseProxyEntry } from "../config.ts"

/**
 * The client address of a request. With no trusted proxies it is the socket's peer. When the peer is a trusted
 * proxy, `X-Forwarded-For` is read from its right end (the hop our proxy added) leftwards, skipping trusted proxies:
 * the first address not trusted is the client, so a client cannot choose its address by sending the header itself.
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
  return (request: HttpServerRequest.HttpServerRequest): string => {
    const peer = normaliseAddress(Option.getOrElse(request.remoteAddress, () => "unknown"))
    if (trustedProxies.length === 0 || !isTrusted(peer)) return peer
    const forwarded = request.headers["x-forwarded-for"] ?? ""
    const hops = forwarded.split(",").map(normaliseAddress).filter((hop) => hop.length > 0)
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]
      if (hop !== undefined && !isTrusted(hop)) return hop
    }
    return hops[0] ?? peer
  }
}
