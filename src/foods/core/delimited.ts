/** Delimited text read piece by piece: csv-parse over a stream, and a pre-filter that keeps only the records that mention a needle. */
import { createInterface } from "node:readline"
import type { Readable } from "node:stream"
import { type Options, parse } from "csv-parse"

/**
 * Records of a delimited text stream, parsed piece by piece by csv-parse; the stream is closed when the reader stops.
 * Rows are arrays of fields, or objects keyed by the header row when `columns` is given.
 */
export async function* delimited<Row>(stream: Readable, options: Options): AsyncGenerator<Row> {
  const parser = parse({ skip_empty_lines: true, relax_column_count: true, ...options })
  stream.on("error", (error) => parser.destroy(error))
  const rows: AsyncIterable<Row> = stream.pipe(parser)
  try {
    yield* rows
  } finally {
    stream.destroy()
    parser.destroy()
  }
}

const occurrences = (text: string, char: string) => {
  let n = 0
  for (let at = text.indexOf(char); at >= 0; at = text.indexOf(char, at + 1)) n++
  return n
}

export interface Mentioning {
  readonly encoding: BufferEncoding
  /** The quote character: a record goes on over the next line while its quotes are unbalanced. */
  readonly quote: string
  /** Keep the first record (the header row) whatever it holds. */
  readonly header: boolean
  readonly needles: ReadonlyArray<string>
}

/**
 * The records of a stream whose text mentions one of `needles`, for csv-parse to read. The nutrient tables hold one
 * row per food and nutrient (SR28 ~680,000, a full FoodData Central download tens of millions) of which only a few
 * nutrients are kept: matching the text of each row before parsing keeps an import several times faster than
 * parsing every row. Rows that mention a needle elsewhere are parsed and dropped by the reader. `seen` counts rows.
 */
export async function* recordsMentioning(stream: Readable, options: Mentioning, seen: () => void): AsyncGenerator<Buffer> {
  stream.setEncoding(options.encoding)
  const reader = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY })
  let record = ""
  let first = options.header
  try {
    for await (const line of reader) {
      record = record === "" ? line : `${record}\n${line}`
      if (occurrences(record, options.quote) % 2 === 1) continue
      if (first || options.needles.some((needle) => record.includes(needle))) yield Buffer.from(`${record}\n`, options.encoding)
      if (!first) seen()
      first = false
      record = ""
    }
  } finally {
    reader.close()
    stream.destroy()
  }
}
