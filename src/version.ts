/** The service version, read from package.json (kept apart so the CLI reads it without loading the service). */
import packageJson from "../package.json" with { type: "json" }

export const SERVICE_VERSION = packageJson.version
