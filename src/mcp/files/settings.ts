/** Settings of photos downloaded for analyze_food's image_file (ChatGPT's file parameters). */
import { readFileSync } from "node:fs"
import { Config, ConfigError, Either, type Option } from "effect"

export interface FileSettings {
  /** MCP_FILE_ALLOWED_HOSTS: host names (or IP addresses) a photo may come from even though they resolve to a non-public address. */
  readonly allowedHosts: ReadonlyArray<string>
  /** MCP_FILE_CA_FILE: PEM certificates trusted for downloads besides the usual roots (a private certificate authority). */
  readonly extraCa: Option.Option<string>
  /** MCP_FILE_TIMEOUT_MS: the whole download, redirects included, must finish within this. */
  readonly timeoutMs: number
}

export const fileSettings: Config.Config<FileSettings> = Config.all({
  allowedHosts: Config.string("MCP_FILE_ALLOWED_HOSTS").pipe(
    Config.withDefault(""),
    Config.map((raw) =>
      raw
        .split(",")
        .map((host) => host.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1"))
        .filter((host) => host.length > 0)
    )
  ),
  extraCa: Config.option(
    Config.string("MCP_FILE_CA_FILE").pipe(
      Config.mapOrFail((path) => {
        try {
          const pem = readFileSync(path, "utf8")
          return pem.includes("-----BEGIN CERTIFICATE-----")
            ? Either.right(pem)
            : Either.left(ConfigError.InvalidData(["MCP_FILE_CA_FILE"], `${path} holds no PEM certificate`))
        } catch (error) {
          return Either.left(ConfigError.InvalidData(["MCP_FILE_CA_FILE"], `${path} cannot be read: ${String(error)}`))
        }
      })
    )
  ),
  timeoutMs: Config.integer("MCP_FILE_TIMEOUT_MS").pipe(
    Config.validate({ message: "MCP_FILE_TIMEOUT_MS must be 100 to 60000", validation: (ms) => ms >= 100 && ms <= 60_000 }),
    Config.withDefault(10_000)
  )
})
