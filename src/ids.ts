/** Identifiers the service mints (request ids, reservation and import ids): random UUIDs, or a predictable sequence in tests. */
import { randomUUID } from "node:crypto"
import { Context, Effect, Layer } from "effect"

export interface IdSource {
  /** A new UUID (version 4 layout). */
  readonly uuid: Effect.Effect<string>
}

/** UUIDs 00000000-0000-4000-8000-000000000001, …-000000000002, …: the n-th id a test will see is known in advance. */
export const sequentialIds = (): IdSource => {
  let n = 0
  return { uuid: Effect.sync(() => `00000000-0000-4000-8000-${(++n).toString(16).padStart(12, "0")}`) }
}

/** Random by default, so no layer is needed; tests provide `IdsSequential`. */
export class Ids extends Context.Reference<Ids>()("morsel/Ids", {
  defaultValue: (): IdSource => ({ uuid: Effect.sync(randomUUID) })
}) {
  static readonly next = Effect.flatMap(Ids, (ids) => ids.uuid)
}

/** A fresh sequence per layer build. */
export const IdsSequential = Layer.sync(Ids, sequentialIds)
