/** A typed client of the admin RPC for `morsel admin` and for tests: JSON over HTTP with the bearer token. */
import { FetchHttpClient, HttpClient, HttpClientError, HttpClientRequest } from "@effect/platform"
import { RpcClient, RpcClientError, RpcSerialization } from "@effect/rpc"
import { Effect, Layer, Redacted } from "effect"
import { ADMIN_RPC_PATH, AdminFailure, AdminRpcs } from "./AdminRpc.ts"

/** Fetch with the token on every request; a non-2xx answer (401, 404) fails instead of being read as RPC replies. */
const authorizedHttp = (token: Redacted.Redacted) =>
  Layer.effect(
    HttpClient.HttpClient,
    Effect.map(HttpClient.HttpClient, (client) =>
      client.pipe(HttpClient.mapRequest(HttpClientRequest.bearerToken(Redacted.value(token))), HttpClient.filterStatusOk)
    )
  ).pipe(Layer.provide(FetchHttpClient.layer))

/** The admin RPC client of the server at `baseUrl`; closed with the scope. */
export const makeAdminClient = (baseUrl: string, token: Redacted.Redacted) =>
  RpcClient.make(AdminRpcs).pipe(
    Effect.provide(
      RpcClient.layerProtocolHttp({ url: `${baseUrl.replace(/\/+$/, "")}${ADMIN_RPC_PATH}` }).pipe(
        Layer.provide(RpcSerialization.layerJson),
        Layer.provide(authorizedHttp(token))
      )
    )
  )

/** One line for an operator: the server's own error message when it sent one, else what went wrong on the way. */
export const describeAdminError = (error: AdminFailure | RpcClientError.RpcClientError): Effect.Effect<string> => {
  if (error instanceof AdminFailure) return Effect.succeed(`${error.code}: ${error.message}`)
  const cause = error.cause
  if (HttpClientError.isHttpClientError(cause) && cause._tag === "ResponseError") {
    const status = cause.response.status
    return cause.response.json.pipe(
      Effect.map((body) => `HTTP ${status}: ${messageOf(body) ?? "refused"}`),
      Effect.orElseSucceed(() =>
        status === 404 ? "HTTP 404: the server has no admin interface (ADMIN_TOKEN unset there)" : `HTTP ${status}`
      )
    )
  }
  return Effect.succeed(`${error.message}${cause instanceof Error ? `: ${cause.message}` : ""}`)
}

const messageOf = (body: unknown): string | undefined => {
  if (typeof body !== "object" || body === null || !("error" in body)) return undefined
  const inner = body.error
  if (typeof inner !== "object" || inner === null) return undefined
  const code = "code" in inner && typeof inner.code === "string" ? inner.code : undefined
  const message = "message" in inner && typeof inner.message === "string" ? inner.message : undefined
  return code && message ? `${code}: ${message}` : (message ?? code)
}

export { RpcClientError }
