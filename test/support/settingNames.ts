/** Every setting the service reads, as src/config.ts reads them: recorded from one read of an empty environment. */
import { ConfigProvider, Effect } from "effect"
import { loadSettings } from "../../src/config.ts"

export const settingNames = (): ReadonlySet<string> => {
  const names = new Set<string>()
  const recording = ConfigProvider.fromMap(new Map()).pipe(
    ConfigProvider.mapInputPath((name) => {
      names.add(name)
      return name
    })
  )
  Effect.runSync(Effect.either(loadSettings.pipe(Effect.withConfigProvider(recording))))
  return names
}
