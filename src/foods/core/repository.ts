/** SQL for food records: batched upserts by (source, source_id), stale-record removal, index loading and the live-API cache. */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import { countRows, rowsOf } from "../../db/rows.ts"
import { type FoodPortion, type FoodRecord, FoodSource, MORE_NUTRIENTS, type MoreNutrients, UNKNOWN_NUTRIENTS } from "./records.ts"

/** Rows per statement and per transaction; keeps every statement far below PostgreSQL's 65,535 parameters. */
export const BATCH_SIZE = 500

const FoodRow = Schema.Struct({
  source: FoodSource,
  source_id: Schema.String,
  data_type: Schema.String,
  description: Schema.String,
  food_group: Schema.NullOr(Schema.String),
  common_names: Schema.NullOr(Schema.String),
  descriptors: Schema.NullOr(Schema.String),
  manufacturer: Schema.NullOr(Schema.String),
  surveyed: Schema.Boolean,
  kcal: Schema.Number,
  protein_g: Schema.Number,
  carbs_g: Schema.Number,
  fat_g: Schema.Number,
  fiber_g: Schema.NullOr(Schema.Number),
  sugars_g: Schema.NullOr(Schema.Number),
  saturated_fat_g: Schema.NullOr(Schema.Number),
  sodium_mg: Schema.NullOr(Schema.Number),
  cholesterol_mg: Schema.NullOr(Schema.Number),
  potassium_mg: Schema.NullOr(Schema.Number),
  calcium_mg: Schema.NullOr(Schema.Number),
  iron_mg: Schema.NullOr(Schema.Number),
  vitamin_c_mg: Schema.NullOr(Schema.Number)
})
type FoodRow = typeof FoodRow.Type
const foodRows = rowsOf(FoodRow)
const importIds = rowsOf(Schema.Struct({ import_id: Schema.String }))
const sourceCounts = rowsOf(Schema.Struct({ source: FoodSource, foods: Schema.Number, portions: Schema.Number }))
const importPaths = rowsOf(Schema.Struct({ path: Schema.String }))
const searches = rowsOf(Schema.Struct({ fdc_ids: Schema.String }))

const toRow = (record: FoodRecord, importId: string, at: Date) => ({
  source: record.source,
  source_id: record.sourceId,
  data_type: record.dataType,
  description: record.description,
  food_group: record.foodGroup,
  common_names: record.commonNames,
  descriptors: record.descriptors,
  manufacturer: record.manufacturer,
  surveyed: record.surveyed,
  kcal: record.per100g.kcal,
  protein_g: record.per100g.protein_g,
  carbs_g: record.per100g.carbs_g,
  fat_g: record.per100g.fat_g,
  ...(record.more ?? UNKNOWN_NUTRIENTS),
  import_id: importId,
  updated_at: at
})

const moreOf = (row: FoodRow): MoreNutrients => {
  let known = false
  for (const key of MORE_NUTRIENTS) if (row[key] !== null) known = true
  if (!known) return UNKNOWN_NUTRIENTS
  return {
    fiber_g: row.fiber_g,
    sugars_g: row.sugars_g,
    saturated_fat_g: row.saturated_fat_g,
    sodium_mg: row.sodium_mg,
    cholesterol_mg: row.cholesterol_mg,
    potassium_mg: row.potassium_mg,
    calcium_mg: row.calcium_mg,
    iron_mg: row.iron_mg,
    vitamin_c_mg: row.vitamin_c_mg
  }
}

const fromRow = (row: FoodRow, portions: ReadonlyArray<FoodPortion> = []): FoodRecord => ({
  source: row.source,
  sourceId: row.source_id,
  dataType: row.data_type,
  description: row.description,
  foodGroup: row.food_group,
  commonNames: row.common_names,
  descriptors: row.descriptors,
  manufacturer: row.manufacturer,
  surveyed: row.surveyed,
  per100g: { kcal: row.kcal, protein_g: row.protein_g, carbs_g: row.carbs_g, fat_g: row.fat_g },
  more: moreOf(row),
  portions
})

/** Writes one batch in one transaction: the records replace any earlier version, portions included. */
export const upsertBatch = (records: ReadonlyArray<FoodRecord>, importId: string) =>
  Effect.gen(function* () {
    if (records.length === 0) return 0
    const sql = yield* SqlClient.SqlClient
    const at = new Date(yield* Clock.currentTimeMillis)
    const write = Effect.gen(function* () {
      yield* sql`
        INSERT INTO foods ${sql.insert(records.map((r) => toRow(r, importId, at)))}
        ON CONFLICT (source, source_id) DO UPDATE SET
          data_type = EXCLUDED.data_type, description = EXCLUDED.description, food_group = EXCLUDED.food_group,
          common_names = EXCLUDED.common_names, descriptors = EXCLUDED.descriptors, manufacturer = EXCLUDED.manufacturer, surveyed = EXCLUDED.surveyed,
          kcal = EXCLUDED.kcal, protein_g = EXCLUDED.protein_g, carbs_g = EXCLUDED.carbs_g, fat_g = EXCLUDED.fat_g,
          fiber_g = EXCLUDED.fiber_g, sugars_g = EXCLUDED.sugars_g, saturated_fat_g = EXCLUDED.saturated_fat_g,
          sodium_mg = EXCLUDED.sodium_mg, cholesterol_mg = EXCLUDED.cholesterol_mg, potassium_mg = EXCLUDED.potassium_mg,
          calcium_mg = EXCLUDED.calcium_mg, iron_mg = EXCLUDED.iron_mg, vitamin_c_mg = EXCLUDED.vitamin_c_mg,
          import_id = EXCLUDED.import_id, updated_at = EXCLUDED.updated_at`
      const bySource = new Map<FoodSource, Array<string>>()
      for (const r of records) bySource.set(r.source, [...(bySource.get(r.source) ?? []), r.sourceId])
      for (const [source, ids] of bySource) {
        yield* sql`DELETE FROM food_portions WHERE source = ${source} AND source_id IN ${sql.in(ids)}`
      }
      const portions = records.flatMap((r) =>
        r.portions.map((p, i) => ({ source: r.source, source_id: r.sourceId, seq: i + 1, amount: p.amount, unit: p.unit, grams: p.grams }))
      )
      for (let i = 0; i < portions.length; i += BATCH_SIZE * 2) {
        yield* sql`INSERT INTO food_portions ${sql.insert(portions.slice(i, i + BATCH_SIZE * 2))}`
      }
      return portions.length
    })
    return yield* sql.withTransaction(write)
  })

/** Removes records of the given source and data types that the import `importId` did not bring (re-import replaces). */
export const removeStale = (source: FoodSource, dataTypes: ReadonlyArray<string>, importId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* countRows(sql`
      WITH gone AS (
        DELETE FROM foods WHERE source = ${source} AND data_type IN ${sql.in(dataTypes)} AND import_id <> ${importId}
        RETURNING 1
      ) SELECT count(*)::int AS n FROM gone`)
    return rows[0]?.n ?? 0
  })

/** Removes the foods an import labelled `label` stored that no later import brought again (USDA's own files replace the shipped copy). */
export const removeImportedAs = (label: string, keep: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* countRows(sql`
      WITH gone AS (
        DELETE FROM foods WHERE import_id <> ${keep} AND import_id IN (SELECT import_id FROM food_imports WHERE path = ${label})
        RETURNING 1
      ) SELECT count(*)::int AS n FROM gone`)
    return rows[0]?.n ?? 0
  })

/** What serves the foods: the path or label of the newest import, and how many foods the database holds. */
export const foodData = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const labels = yield* importPaths(sql`SELECT path FROM food_imports ORDER BY finished_at DESC, import_id DESC LIMIT 1`)
  const counts = yield* countRows(sql`SELECT count(*)::int AS n FROM foods WHERE source <> 'fdc_api'`)
  return { label: labels[0]?.path, foods: counts[0]?.n ?? 0 }
})

export const recordImport = (importId: string, path: string, foods: number, portions: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const finishedAt = new Date(yield* Clock.currentTimeMillis)
    yield* sql`INSERT INTO food_imports ${sql.insert({ import_id: importId, path, foods, portions, finished_at: finishedAt })}`
  })

/** The newest finished import, to notice that another process changed the records. */
export const latestImport = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* importIds(sql`SELECT import_id FROM food_imports ORDER BY finished_at DESC, import_id DESC LIMIT 1`)
  return rows[0]?.import_id
})

const portionRows = rowsOf(
  Schema.Struct({ source: FoodSource, source_id: Schema.String, amount: Schema.Number, unit: Schema.String, grams: Schema.Number })
)

/** Every food record with its household portions, for the matcher's in-memory index and the foods a client looks up. */
export const loadRecords = (sources: ReadonlyArray<FoodSource> = ["sr28", "fdc"]) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const portions = new Map<string, Array<FoodPortion>>()
    const units = new Map<string, string>()
    for (const p of yield* portionRows(sql`
      SELECT source, source_id, amount, unit, grams FROM food_portions
      WHERE source IN ${sql.in(sources)} ORDER BY source, source_id, seq`)) {
      const key = `${p.source}:${p.source_id}`
      // Units repeat ("cup", "oz", "1 large"): one string each.
      let unit = units.get(p.unit)
      if (unit === undefined) {
        unit = p.unit
        units.set(unit, unit)
      }
      const list = portions.get(key) ?? []
      list.push({ amount: p.amount, unit, grams: p.grams })
      portions.set(key, list)
    }
    const rows = yield* foodRows(sql`
      SELECT source, source_id, data_type, description, food_group, common_names, descriptors, manufacturer, surveyed, kcal, protein_g, carbs_g, fat_g,
        fiber_g, sugars_g, saturated_fat_g, sodium_mg, cholesterol_mg, potassium_mg, calcium_mg, iron_mg, vitamin_c_mg
      FROM foods WHERE source IN ${sql.in(sources)} ORDER BY source, source_id`)
    return rows.map((row) => fromRow(row, portions.get(`${row.source}:${row.source_id}`)))
  })

export const countFoods = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sourceCounts(sql`
    SELECT f.source, count(DISTINCT f.source_id)::int AS foods, count(p.seq)::int AS portions
    FROM foods f LEFT JOIN food_portions p ON p.source = f.source AND p.source_id = f.source_id
    GROUP BY f.source ORDER BY f.source`)
  return rows
})

// ---- live FoodData Central API cache ----

export const cachedSearch = (query: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const hits = yield* searches(sql`SELECT fdc_ids FROM fdc_api_searches WHERE query = ${query}`)
    const hit = hits[0]
    if (hit === undefined) return undefined
    const ids = hit.fdc_ids.split(",").filter((id) => id !== "")
    if (ids.length === 0) return [] as ReadonlyArray<FoodRecord>
    const rows = yield* foodRows(sql`
      SELECT source, source_id, data_type, description, food_group, common_names, descriptors, manufacturer, surveyed, kcal, protein_g, carbs_g, fat_g,
        fiber_g, sugars_g, saturated_fat_g, sodium_mg, cholesterol_mg, potassium_mg, calcium_mg, iron_mg, vitamin_c_mg
      FROM foods WHERE source = 'fdc_api' AND source_id IN ${sql.in(ids)}`)
    return rows.map((row) => fromRow(row))
  })

export const storeSearch = (query: string, records: ReadonlyArray<FoodRecord>, at: Date) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(
      Effect.gen(function* () {
        if (records.length > 0) yield* upsertBatch(records, "fdc-api")
        yield* sql`
          INSERT INTO fdc_api_searches ${sql.insert({ query, fdc_ids: records.map((r) => r.sourceId).join(","), fetched_at: at })}
          ON CONFLICT (query) DO UPDATE SET fdc_ids = EXCLUDED.fdc_ids, fetched_at = EXCLUDED.fetched_at`
      })
    )
  })
