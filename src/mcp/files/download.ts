/**
 * Downloads a photo a chat host hands over as a link, without becoming a door into private networks: https only,
 * every address checked after its name is resolved and then used for the connection itself (no second look-up
 * between the check and the connection), the same again after each redirect (at most 3), at most 2,000,000 bytes,
 * one deadline for everything.
 */
import { lookup } from "node:dns/promises"
import type { IncomingMessage } from "node:http"
import { request } from "node:https"
import { isIP, type LookupFunction } from "node:net"
import { rootCertificates } from "node:tls"
import { Option } from "effect"
import { isPublicAddress } from "./addresses.ts"
import type { FileSettings } from "./settings.ts"

export const MAX_REDIRECTS = 3

/** Why a download was refused or failed, in words for the caller; `tooLarge` for the size limit. */
export class DownloadRefused extends Error {
  constructor(
    message: string,
    readonly tooLarge = false
  ) {
    super(message)
  }
}

interface Resolved {
  readonly address: string
  readonly family: 4 | 6
}

/** The address to connect to for a URL, or a refusal: checked before any connection is made. */
const resolve = async (url: URL, settings: FileSettings): Promise<Resolved> => {
  if (url.protocol !== "https:") throw new DownloadRefused(`only https links are accepted, not ${url.protocol.replace(/:$/, "")}`)
  if (url.username !== "" || url.password !== "") throw new DownloadRefused("links with a user name or password are not accepted")
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase()
  const allowed = settings.allowedHosts.includes(host)
  const family = isIP(host)
  const addresses: ReadonlyArray<Resolved> =
    family === 4 || family === 6
      ? [{ address: host, family }]
      : await lookup(host, { all: true, verbatim: true }).then(
          (found) => found.map((entry) => ({ address: entry.address, family: entry.family === 6 ? (6 as const) : (4 as const) })),
          () => {
            throw new DownloadRefused(`the host ${host} could not be resolved`)
          }
        )
  const first = addresses[0]
  if (first === undefined) throw new DownloadRefused(`the host ${host} has no address`)
  // Every address of the name must be public: which one a connection would take is not ours to guess.
  const hidden = addresses.find((entry) => !isPublicAddress(entry.address))
  if (hidden !== undefined && !allowed)
    throw new DownloadRefused(
      family === 0 ? `${host} resolves to ${hidden.address}, which is not a public internet address` : `${host} is not a public internet address`
    )
  return first
}

/** A look-up that answers the address already checked, whatever it is asked. */
const pinned =
  (resolved: Resolved): LookupFunction =>
  (_hostname, options, callback) => {
    if (options.all) callback(null, [{ address: resolved.address, family: resolved.family }])
    else callback(null, resolved.address, resolved.family)
  }

const get = (url: URL, resolved: Resolved, settings: FileSettings, signal: AbortSignal) =>
  new Promise<IncomingMessage>((done, fail) => {
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1")
    const outgoing = request(
      {
        host,
        port: url.port === "" ? 443 : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: "GET",
        headers: { accept: "image/jpeg, image/png", "user-agent": "morsel-photo-fetch" },
        lookup: pinned(resolved),
        ...(isIP(host) === 0 ? { servername: host } : {}),
        ...Option.match(settings.extraCa, { onNone: () => ({}), onSome: (pem) => ({ ca: [...rootCertificates, pem] }) }),
        agent: false,
        signal
      },
      done
    )
    outgoing.on("error", fail)
    outgoing.end()
  })

const readBody = (response: IncomingMessage, maxBytes: number) =>
  new Promise<Buffer>((done, fail) => {
    // The first outcome counts: destroying the response reports it as cut off, after the size refusal.
    const stop = (refusal: DownloadRefused) => {
      fail(refusal)
      response.destroy()
    }
    const declared = Number(response.headers["content-length"])
    if (Number.isFinite(declared) && declared > maxBytes) return stop(new DownloadRefused(`the file is ${declared} bytes; the limit is ${maxBytes} bytes`, true))
    const chunks: Array<Buffer> = []
    let size = 0
    response.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > maxBytes) stop(new DownloadRefused(`the file is over the limit of ${maxBytes} bytes`, true))
      else chunks.push(chunk)
    })
    response.on("end", () => done(Buffer.concat(chunks)))
    response.on("error", () => fail(new DownloadRefused("the download was cut off")))
    response.on("aborted", () => fail(new DownloadRefused("the download was cut off")))
  })

/** The bytes behind a link, following at most MAX_REDIRECTS redirects; aborting the signal stops everything at once. */
export const download = async (link: string, settings: FileSettings, maxBytes: number, signal: AbortSignal): Promise<Buffer> => {
  let url: URL
  try {
    url = new URL(link)
  } catch {
    throw new DownloadRefused("not a URL")
  }
  for (let redirects = 0; ; redirects++) {
    const resolved = await resolve(url, settings)
    signal.throwIfAborted()
    const response = await get(url, resolved, settings, signal).catch((error: unknown) => {
      if (signal.aborted) throw signal.reason
      throw new DownloadRefused(`the download failed (${error instanceof Error && "code" in error ? String(error.code) : "connection error"})`)
    })
    const status = response.statusCode ?? 0
    const location = response.headers.location
    if ([301, 302, 303, 307, 308].includes(status) && location !== undefined) {
      response.destroy()
      if (redirects === MAX_REDIRECTS) throw new DownloadRefused(`more than ${MAX_REDIRECTS} redirects`)
      try {
        url = new URL(location, url)
      } catch {
        throw new DownloadRefused("redirected to something that is not a URL")
      }
      continue
    }
    if (status !== 200) {
      response.destroy()
      throw new DownloadRefused(`the download answered HTTP ${status}`)
    }
    return readBody(response, maxBytes)
  }
}
