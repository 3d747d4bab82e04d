/** Imports USDA downloads (SR28 ASCII, FoodData Central CSV; folder or zip) into PostgreSQL, idempotently and with progress. */
import { Clock, Console, Data, Effect, Runtime } from "effect"
import { Ids } from "../../ids.ts"
import type { FoodRecord } from "./records.ts"
import { BATCH_SIZE, recordImport, removeImportedAs, removeStale, upsertBatch } from "./repository.ts"
import { SHIPPED_LABEL } from "./shipped.ts"
import { readFdc, readSr28, locateDatasets } from "./sources.ts"

export class FoodImportError extends Data.TaggedError("FoodImportError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface ImportedDataset {
  readonly label: string
  readonly kind: "sr28" | "fdc"
  readonly foods: number
  readonly portions: number
  /** Records of an earlier import of the same source and data types that this one no longer holds. */
  readonly removed: number
}

export interface ImportSummary {
  readonly importId: string
  readonly datasets: ReadonlyArray<ImportedDataset>
  readonly foods: number
  readonly portions: number
  readonly elapsedMs: number
}

export interface ImportOptions {
  /** Progress lines; by default they go to the Console service (stdout). */
  readonly progress?: (message: string) => void
}

const attempt = <A>(what: string, run: () => Promise<A>) =>
  Effect.tryPromise({
    try: run,
    catch: (cause) => new FoodImportError({ message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
  })

/**
 * Loads every SR28 or FoodData Central download found at `path` (a folder or a zip). Records are upserted by
 * (source, source_id) in one transaction per batch, and records of the same source and data types that the download
 * no longer holds are removed, so importing twice leaves the same rows.
 */
export const importFoods = (path: string, options: ImportOptions = {}) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const progress = options.progress ?? ((message: string) => Runtime.runSync(runtime)(Console.log(message)))
    const started = yield* Clock.currentTimeMillis
    const importId = yield* Ids.next
    const datasets = yield* attempt(`cannot read ${path}`, () => locateDatasets(path))
    const imported: Array<ImportedDataset> = []
    for (const dataset of datasets) {
      const records: ReadonlyArray<FoodRecord> = yield* attempt(`cannot read ${dataset.label}`, () =>
        dataset.kind === "sr28" ? readSr28(dataset, progress) : readFdc(dataset, progress)
      )
      let portions = 0
      for (let i = 0; i < records.length; i += BATCH_SIZE) {
        portions += yield* upsertBatch(records.slice(i, i + BATCH_SIZE), importId)
        const written = Math.min(i + BATCH_SIZE, records.length)
        if (written === records.length || (i / BATCH_SIZE) % 4 === 3) progress(`${dataset.label}: stored ${written.toLocaleString("en-US")}/${records.length.toLocaleString("en-US")} foods`)
      }
      const source = dataset.kind === "sr28" ? "sr28" : "fdc"
      const dataTypes = [...new Set(records.map((r) => r.dataType))]
      const removed = dataTypes.length > 0 ? yield* removeStale(source, dataTypes, importId) : 0
      if (removed > 0) progress(`${dataset.label}: removed ${removed} foods no longer in the download`)
      imported.push({ label: dataset.label, kind: dataset.kind, foods: records.length, portions, removed })
    }
    const shippedRemoved = yield* removeImportedAs(SHIPPED_LABEL, importId)
    if (shippedRemoved > 0) progress(`removed ${shippedRemoved.toLocaleString("en-US")} foods of the shipped SR28 copy that this import replaces`)
    const foods = imported.reduce((n, d) => n + d.foods, 0)
    const portions = imported.reduce((n, d) => n + d.portions, 0)
    yield* recordImport(importId, path, foods, portions)
    const elapsedMs = (yield* Clock.currentTimeMillis) - started
    progress(`imported ${foods.toLocaleString("en-US")} foods and ${portions.toLocaleString("en-US")} portions in ${(elapsedMs / 1000).toFixed(1)} s`)
    return { importId, datasets: imported, foods, portions, elapsedMs } satisfies ImportSummary
  }).pipe(Effect.withSpan("foods.import", { attributes: { path } }))
