/** The memory a start leaves behind, given back once the server is ready. */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Effect } from "effect"

/**
 * One full garbage collection once serving: a start (the database's files loaded, migrations, the food index)
 * leaves array buffers and objects behind that V8 would keep for minutes at idle, about 50–120 MiB of the
 * process. `gc` is not exposed without --expose-gc; setting the flag now gives it to a new context.
 */
export const collectStartGarbage = Effect.sync(() => {
  setFlagsFromString("--expose-gc")
  const gc: unknown = runInNewContext("gc")
  if (typeof gc === "function") gc()
})
