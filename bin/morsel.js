#!/usr/bin/env node
// The bundled command line when the build made one (it starts faster), else the compiled modules.
import { existsSync } from "node:fs"

const bundle = new URL("../dist/bundle/morsel.mjs", import.meta.url)
await import(existsSync(bundle) ? bundle.href : "../dist/src/cli.js")
