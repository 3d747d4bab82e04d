#!/usr/bin/env node
// Writes the files of a new, empty embedded database to dist/new-database.tar: in-memory databases (the sandbox's)
// then load it instead of running initdb, whose ~600 MiB would not fit a small container.
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const { writeNewDatabaseArchive } = await import("../dist/src/db/Database.js")
await Effect.runPromise(writeNewDatabaseArchive(join(root, "dist/new-database.tar")))
