/** Search quality: the share of everyday names whose first search result is one of their plain SR28 records (tune.tsv, held-out.tsv). */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import type { FoodIndex } from "../../../src/foods/core/foodIndex.ts"
import { searchIn } from "../../../src/foods/core/search.ts"

export interface QualityName {
  readonly name: string
  /** The SR28 NDB numbers acceptable as the plain record for the name. */
  readonly plain: ReadonlyArray<string>
}

/** A set's names: one a line, tab separated (name, acceptable ids joined by commas, a note); `#` lines are its header. */
export const readSet = (file: "tune.tsv" | "held-out.tsv"): ReadonlyArray<QualityName> =>
  readFileSync(fileURLToPath(new URL(file, import.meta.url)), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.startsWith("#"))
    .map((line) => {
      const [name = "", ids = ""] = line.split("\t")
      return { name: name.trim(), plain: ids.split(",").map((id) => id.trim()).filter((id) => id !== "") }
    })

export interface QualityMiss {
  readonly name: string
  /** What ranked first instead (undefined: nothing was found). */
  readonly first: string | undefined
}

/** Plain-first share of a set, as GET /v1/foods ranks (its default limit), with the names whose first result was not plain. */
export const plainFirst = (index: FoodIndex, names: ReadonlyArray<QualityName>) => {
  const misses: Array<QualityMiss> = []
  for (const { name, plain } of names) {
    const [first] = searchIn(index, name, 10)
    if (first === undefined || !plain.includes(first.sourceId)) misses.push({ name, first: first === undefined ? undefined : `${first.sourceId} ${first.description}` })
  }
  return { share: (names.length - misses.length) / names.length, count: names.length, misses }
}

export const describeQuality = (label: string, result: ReturnType<typeof plainFirst>) =>
  `${label}: plain record first for ${result.count - result.misses.length} of ${result.count} names (${(100 * result.share).toFixed(1)} %)` +
  result.misses.map((m) => `\n  ${m.name} -> ${m.first ?? "nothing"}`).join("")
