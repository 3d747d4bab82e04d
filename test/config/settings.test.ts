import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { AppConfig, AppConfigFromEnv } from "../../src/config.ts"

const settings = (env: Record<string, string>) => Effect.either(Effect.provide(AppConfig, AppConfigFromEnv(env)))

describe("settings", () => {
  it.effect("LOG_LEVEL takes the usual names of levels in any case", () =>
    Effect.gen(function* () {
      for (const [given, level] of [
        ["warn", "warning"],
        ["WARNING", "warning"],
        ["Debug", "debug"],
        ["off", "none"],
        ["error", "error"]
      ] as const) {
        const read = yield* settings({ LOG_LEVEL: given })
        expect(Either.map(read, (s) => s.logLevel)).toEqual(Either.right(level))
      }
      const wrong = yield* settings({ LOG_LEVEL: "loud" })
      expect(Either.isLeft(wrong) && String(wrong.left)).toContain('Invalid data at LOG_LEVEL: "must be a log level (all, trace, debug, info, warn, warning, error, fatal, none, off, silent), not "loud"')
    }))

  it.effect("METRICS is on or off; anything else names the setting", () =>
    Effect.gen(function* () {
      expect(Either.map(yield* settings({}), (s) => s.metrics)).toEqual(Either.right(false))
      expect(Either.map(yield* settings({ METRICS: "on" }), (s) => s.metrics)).toEqual(Either.right(true))
      expect(Either.map(yield* settings({ METRICS: "false" }), (s) => s.metrics)).toEqual(Either.right(false))
      const wrong = yield* settings({ METRICS: "maybe" })
      expect(Either.isLeft(wrong) && String(wrong.left)).toContain('Invalid data at METRICS: "must be on or off, not "maybe""')
    }))
})
