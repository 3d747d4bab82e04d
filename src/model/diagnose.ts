/**
 * Why the vision model server could not be reached, found by retracing the way there (its name, a connection, the
 * TLS handshake): the model call itself only learns "could not reach", and the check owes the operator the fix.
 */
import { lookup } from "node:dns/promises"
import { isIP, connect as netConnect, type Socket } from "node:net"
import { connect as tlsConnect } from "node:tls"

/** What went wrong on the way to the server: a sentence with the fix, and the system's own words for `--verbose`. */
export interface Diagnosis {
  readonly cause: "unknown_host" | "connection_refused" | "tls_failure" | "connect_timeout" | "connection_failed" | "reachable"
  readonly why: string
  readonly detail: string
}

const codeOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : "ERROR"

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** Opens one connection (TLS for https) and closes it; resolves with the error, or undefined when it opened. */
const open = (url: URL, timeoutMs: number): Promise<unknown> =>
  new Promise((resolve) => {
    const host = url.hostname.replace(/^\[|\]$/g, "")
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80))
    const socket: Socket =
      url.protocol === "https:"
        ? tlsConnect({ host, port, servername: isIP(host) === 0 ? host : undefined }, () => done(undefined))
        : netConnect({ host, port }, () => done(undefined))
    const timer = setTimeout(() => done(Object.assign(new Error(`no connection within ${timeoutMs} ms`), { code: "ETIMEDOUT" })), timeoutMs)
    function done(error: unknown) {
      clearTimeout(timer)
      socket.destroy()
      resolve(error)
    }
    socket.once("error", done)
  })

const TLS_CODES = /^(ERR_SSL_|ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|ERR_OSSL_)/

/** Retraces the way to `baseUrl`; `reachable` when a connection opens (the trouble is then in the answer). */
export const diagnose = async (baseUrl: string, timeoutMs = 5_000): Promise<Diagnosis> => {
  const url = new URL(baseUrl)
  const host = url.hostname.replace(/^\[|\]$/g, "")
  const where = url.host
  if (isIP(host) === 0) {
    const found = await lookup(host).then(
      () => undefined,
      (error: unknown) => error
    )
    if (found !== undefined) {
      return {
        cause: "unknown_host",
        why: `the host ${host} is unknown (no address found for it): check the name in OPENAI_BASE_URL`,
        detail: `${codeOf(found)}: ${messageOf(found)}`
      }
    }
  }
  const error = await open(url, timeoutMs)
  if (error === undefined) {
    return { cause: "reachable", why: `${where} accepted a connection but the request got no answer`, detail: "the connection opened" }
  }
  const code = codeOf(error)
  const detail = `${code}: ${messageOf(error)}`
  if (code === "ECONNREFUSED") {
    return {
      cause: "connection_refused",
      why: `${where} refused the connection (nothing listens there): start the model server, or correct the port in OPENAI_BASE_URL`,
      detail
    }
  }
  if (TLS_CODES.test(code) || /SSL|TLS|certificate/i.test(messageOf(error))) {
    return {
      cause: "tls_failure",
      why: `the TLS handshake with ${where} failed (${code}): a server without TLS is reached with http://, and a certificate of your own CA is trusted with NODE_EXTRA_CA_CERTS`,
      detail
    }
  }
  if (code === "ETIMEDOUT") {
    return {
      cause: "connect_timeout",
      why: `${where} did not accept a connection within ${timeoutMs / 1000} s: check the address in OPENAI_BASE_URL and any firewall on the way`,
      detail
    }
  }
  return { cause: "connection_failed", why: `the connection to ${where} failed (${code})`, detail }
}
