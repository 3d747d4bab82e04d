/** Database failures as callers see them: 503 storage_unavailable, the cause logged and never sent. */
import { SqlError } from "@effect/sql"
import { Effect } from "effect"
import { ServiceUnavailable } from "../domain/errors.ts"

export const storageUnavailable = (requestId?: string) =>
  new ServiceUnavailable({
    error: {
      code: "storage_unavailable",
      message: "Storage is unavailable; retry the same request.",
      ...(requestId === undefined ? {} : { request_id: requestId })
    }
  })

/** The same, naming the analysis request the failure belongs to. */
export const orStorageUnavailableFor =
  (requestId?: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.catchIf(
      effect,
      (e): e is Extract<E, SqlError.SqlError> => e instanceof SqlError.SqlError,
      (e) => Effect.logError("storage failure", e).pipe(Effect.zipRight(Effect.fail(storageUnavailable(requestId))))
    )

export const orStorageUnavailable = orStorageUnavailableFor()
