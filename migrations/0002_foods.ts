/** Food-composition records (USDA SR28 / FoodData Central), their household portions, import runs and the live-API cache. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // source_id is the record identifier of the source: the NDB number for SR28, the FDC id for FoodData Central.
  yield* sql`
    CREATE TABLE foods (
      source text NOT NULL CHECK (source IN ('sr28', 'fdc', 'fdc_api')),
      source_id text NOT NULL,
      data_type text NOT NULL,
      description text NOT NULL,
      food_group text,
      common_names text,
      manufacturer text,
      surveyed boolean NOT NULL DEFAULT false,
      kcal double precision NOT NULL CHECK (kcal >= 0),
      protein_g double precision NOT NULL CHECK (protein_g >= 0),
      carbs_g double precision NOT NULL CHECK (carbs_g >= 0),
      fat_g double precision NOT NULL CHECK (fat_g >= 0),
      import_id text NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (source, source_id)
    )`
  yield* sql`
    CREATE TABLE food_portions (
      source text NOT NULL,
      source_id text NOT NULL,
      seq integer NOT NULL,
      amount double precision NOT NULL,
      unit text NOT NULL,
      grams double precision NOT NULL CHECK (grams > 0),
      PRIMARY KEY (source, source_id, seq),
      FOREIGN KEY (source, source_id) REFERENCES foods (source, source_id) ON DELETE CASCADE
    )`
  // One row per finished import; the newest id tells running matchers that their index is stale.
  yield* sql`
    CREATE TABLE food_imports (
      import_id text PRIMARY KEY,
      path text NOT NULL,
      foods integer NOT NULL,
      portions integer NOT NULL,
      finished_at timestamptz NOT NULL DEFAULT now()
    )`
  // Live-API searches already made (fdc_ids: comma-separated FDC ids, empty when nothing was found).
  yield* sql`
    CREATE TABLE fdc_api_searches (
      query text PRIMARY KEY,
      fdc_ids text NOT NULL,
      fetched_at timestamptz NOT NULL
    )`
})
