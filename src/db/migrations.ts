/** Applies the numbered migrations of migrations/ (a static record, so bundling keeps them). */
import { Migrator } from "@effect/sql"
import { Effect } from "effect"
import { migrations } from "../../migrations/index.ts"

export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "morsel_migrations"
}).pipe(Effect.withSpan("db.migrate"))
