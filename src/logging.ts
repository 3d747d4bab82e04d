/** LOG_FORMAT and LOG_LEVEL applied to every log line of the service; log lines go to stderr, stdout is the commands' output. */
import { Effect, Layer, Logger, LogLevel } from "effect"
import { AppConfig, type Settings } from "./config.ts"

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

/** The logger of a format, writing to stderr: `morsel … --json | jq` reads one JSON document, whatever was logged. */
export const stderrLogger = (format: Settings["logFormat"]) =>
  format === "json" ? Logger.withConsoleError(Logger.jsonLogger) : Logger.prettyLogger({ stderr: true, colors: process.stderr.isTTY === true })

/** Effect's default logger writes to stdout; this one replaces it before the settings are read (or when they are bad). */
export const StderrLogging = Logger.replace(Logger.defaultLogger, stderrLogger(process.stderr.isTTY ? "pretty" : "json"))

export const LoggingLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (settings) =>
    Layer.mergeAll(Logger.replace(Logger.defaultLogger, stderrLogger(settings.logFormat)), Logger.minimumLogLevel(levels[settings.logLevel]))
  )
)
