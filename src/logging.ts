/** LOG_FORMAT and LOG_LEVEL applied to every log line of the service. */
import { Effect, Layer, Logger, LogLevel } from "effect"
import { AppConfig } from "./config.ts"

const levels = {
  all: LogLevel.All,
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None
} as const

export const LoggingLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (settings) =>
    Layer.mergeAll(settings.logFormat === "json" ? Logger.json : Logger.pretty, Logger.minimumLogLevel(levels[settings.logLevel]))
  )
)
