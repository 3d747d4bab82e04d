/** Response headers set on the way out, whether the handler succeeds or fails with a typed error. */
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"

export const setResponseHeader = (name: string, value: string) =>
  HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeader(response, name, value)))
