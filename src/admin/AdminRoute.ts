/** POST /admin/rpc: the admin RPC over HTTP (JSON), behind the ADMIN_TOKEN bearer; absent (404) when no token is set. */
import { createHash, timingSafeEqual } from "node:crypto"
import { HttpLayerRouter, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { RpcSerialization, RpcServer } from "@effect/rpc"
import { Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../config.ts"
import { AdminHandlersLive } from "./AdminHandlers.ts"
import { ADMIN_RPC_PATH, AdminRpcs } from "./AdminRpc.ts"

/** Digests have one length whatever the input, so the comparison takes the same time for any wrong token. */
const digest = (s: string) => createHash("sha256").update(s, "utf8").digest()

export const tokenMatches = (expected: Redacted.Redacted, authorization: string | undefined): boolean => {
  const match = /^Bearer (.+)$/.exec(authorization ?? "")
  const given = match?.[1] ?? ""
  // Evaluated even for a missing header, so a missing and a wrong token cost the same.
  const same = timingSafeEqual(digest(given), digest(Redacted.value(expected)))
  return match !== null && same
}

const unauthorized = HttpServerResponse.unsafeJson(
  { _tag: "Unauthorized", error: { code: "invalid_admin_token", message: "the admin interface needs Authorization: Bearer <ADMIN_TOKEN>" } },
  { status: 401, headers: { "www-authenticate": 'Bearer realm="morsel-admin"' } }
)

export const AdminRoute = HttpLayerRouter.use((router) =>
  Effect.gen(function* () {
    const settings = yield* AppConfig
    // Without a token the interface does not exist: the path answers 404 like any unknown one.
    if (Option.isNone(settings.adminToken)) return
    const token = settings.adminToken.value
    const rpc = yield* RpcServer.toHttpApp(AdminRpcs)
    yield* router.add("POST", ADMIN_RPC_PATH, (request: HttpServerRequest.HttpServerRequest) =>
      tokenMatches(token, request.headers["authorization"]) ? rpc : Effect.succeed(unauthorized)
    )
  })
).pipe(Layer.provide([AdminHandlersLive, RpcSerialization.layerJson]))
