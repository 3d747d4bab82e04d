// Per-address limits count clients, not spellings of them: a port in X-Forwarded-For, or an IPv6 host rotating its
// addresses inside its /64, is the same client each time.
import { HttpServerRequest } from "@effect/platform"
import { describe, expect, it } from "vitest"
import { makeClientAddress } from "../../src/request/clientAddress.ts"

const requestFrom = (peer: string, forwardedFor?: string) =>
  HttpServerRequest.fromWeb(
    new Request("http://127.0.0.1/v1/analyze", forwardedFor === undefined ? {} : { headers: { "x-forwarded-for": forwardedFor } })
  ).modify({ remoteAddress: peer })

const proxied = makeClientAddress(["10.0.0.0/8", "fd00::/8"])
const direct = makeClientAddress([])

describe("the client a per-address limit counts", () => {
  it("an X-Forwarded-For entry with a port is the address without it", () => {
    const plain = proxied(requestFrom("10.1.1.1", "203.0.113.7"))
    expect(proxied(requestFrom("10.1.1.1", "203.0.113.7:5678"))).toBe(plain)
    expect(proxied(requestFrom("10.1.1.1", "203.0.113.7:443, 10.2.2.2:8080"))).toBe(plain)
    expect(proxied(requestFrom("10.1.1.1", "[2001:db8::1]:443"))).toBe(proxied(requestFrom("10.1.1.1", "2001:db8::1")))
    // A trusted proxy is recognised with its port too: the hop left of it is the client.
    expect(proxied(requestFrom("10.1.1.1", "198.51.100.2, [fd00::7]:80"))).toBe(proxied(requestFrom("10.1.1.1", "198.51.100.2")))
    expect(proxied(requestFrom("10.1.1.1", "203.0.113.8:5678"))).not.toBe(plain)
  })

  it("IPv6 addresses inside one /64 are one client; the next /64 is another", () => {
    const rotating = ["2001:db8:0:1::1", "2001:db8:0:1::2", "2001:DB8:0:1:aaaa:bbbb:cccc:dddd", "2001:db8::1:ffff:0:0:1", "[2001:db8:0:1::99]:443"]
    const clients = new Set(rotating.map((address) => proxied(requestFrom("10.1.1.1", address))))
    expect(clients.size).toBe(1)
    expect([...clients]).toEqual(["2001:db8:0:1::/64"])
    expect(proxied(requestFrom("10.1.1.1", "2001:db8:0:2::1"))).toBe("2001:db8:0:2::/64")
    // Without proxies, the connection's own IPv6 peer is grouped the same way.
    expect(direct(requestFrom("2001:db8:0:1::5"))).toBe("2001:db8:0:1::/64")
    expect(direct(requestFrom("fe80::1%eth0"))).toBe("fe80:0:0:0::/64")
  })

  it("an IPv4-mapped IPv6 address is its IPv4 client, as a peer and as a hop", () => {
    expect(direct(requestFrom("::ffff:203.0.113.7"))).toBe("203.0.113.7")
    expect(proxied(requestFrom("::ffff:10.1.1.1", "::ffff:198.51.100.9"))).toBe("198.51.100.9")
    expect(proxied(requestFrom("10.1.1.1", "[::ffff:198.51.100.9]:1234"))).toBe("198.51.100.9")
  })
})
