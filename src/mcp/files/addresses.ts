/** Which addresses a photo may be downloaded from: public internet addresses only. */
import { BlockList, isIP } from "node:net"

/**
 * Never a photo's source: this machine, private networks, link-local (cloud metadata 169.254.169.254 and
 * fd00:ec2::254 among them), carrier-grade NAT, documentation, benchmark, multicast, reserved and unspecified
 * ranges. IPv4-mapped, -compatible and NAT64 IPv6 addresses are judged by the IPv4 address inside them.
 */
const refused = new BlockList()
for (const [network, prefix] of [
  ["0.0.0.0", 8], // "this network", unspecified
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4] // reserved, broadcast
] as const)
  refused.addSubnet(network, prefix, "ipv4")
for (const [network, prefix] of [
  ["::", 128], // unspecified
  ["::1", 128],
  ["100::", 64], // discard
  ["2001::", 23], // IETF protocol assignments (Teredo, ORCHID…)
  ["2001:db8::", 32], // documentation
  ["fc00::", 7], // unique local (fd00:ec2::254 too)
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local
  ["ff00::", 8] // multicast
] as const)
  refused.addSubnet(network, prefix, "ipv6")

/** The IPv4 address an IPv6 address carries (mapped ::ffff:a.b.c.d, compatible ::a.b.c.d, NAT64 64:ff9b::/96), if any. */
const embeddedIpv4 = (address: string): string | undefined => {
  const groups = expandIpv6(address)
  if (groups === undefined) return undefined
  const lastTwo = (groups[6]! << 16) | groups[7]!
  const ipv4 = [lastTwo >>> 24, (lastTwo >>> 16) & 255, (lastTwo >>> 8) & 255, lastTwo & 255].join(".")
  const zeros = (count: number) => groups.slice(0, count).every((group) => group === 0)
  if (zeros(5) && groups[5] === 0xffff) return ipv4
  if (zeros(6) && lastTwo > 1) return ipv4
  if (groups[0] === 0x64 && groups[1] === 0xff9b && groups.slice(2, 6).every((group) => group === 0)) return ipv4
  return undefined
}

/** Eight 16-bit groups of an IPv6 address (with a dotted IPv4 tail or `::`), or undefined for anything else. */
const expandIpv6 = (address: string): Array<number> | undefined => {
  if (isIP(address) !== 6) return undefined
  const plain = address.replace(/%.*$/, "")
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(plain)
  const hex = dotted
    ? plain.slice(0, dotted.index) +
      `${((Number(dotted[1]) << 8) | Number(dotted[2])).toString(16)}:${((Number(dotted[3]) << 8) | Number(dotted[4])).toString(16)}`
    : plain
  const [head = "", tail] = hex.split("::")
  const part = (text: string) => (text === "" ? [] : text.split(":").map((group) => Number.parseInt(group, 16)))
  const left = part(head)
  const right = tail === undefined ? [] : part(tail)
  const missing = 8 - left.length - right.length
  return tail === undefined ? left : [...left, ...Array<number>(missing).fill(0), ...right]
}

/** True when a photo may be downloaded from this IP address. */
export const isPublicAddress = (address: string): boolean => {
  const family = isIP(address)
  if (family === 4) return !refused.check(address, "ipv4")
  if (family !== 6) return false
  const inner = embeddedIpv4(address)
  if (inner !== undefined) return !refused.check(inner, "ipv4")
  return !refused.check(address.replace(/%.*$/, ""), "ipv6")
}
