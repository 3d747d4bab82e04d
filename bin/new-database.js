#!/usr/bin/env node
// Writes the files of a new database to dist/new-database.tar: migrated and holding the shipped copy of USDA SR28,
// stored by the code a server's first start on an empty PostgreSQL uses. A first start on a new folder and in-memory
// databases (the sandbox's) unpack it instead of running initdb (whose ~600 MiB would not fit a small container),
// migrating and storing 8,789 foods.
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const { writeNewDatabaseArchive } = await import("../dist/src/db/Database.js")
const { loadShippedFoods } = await import("../dist/src/foods/core/shipped.js")
await Effect.runPromise(writeNewDatabaseArchive(join(root, "dist/new-database.tar"), loadShippedFoods))
