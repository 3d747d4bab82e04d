/** Reads USDA downloads packed as zip files through yauzl: the names of the files, then one file's bytes as a stream. */
import type { Readable } from "node:stream"
import { openPromise } from "yauzl"

/** The paths of the files in a zip (folders left out), from its central directory; no file data is read. */
export const listZip = async (path: string): Promise<ReadonlyArray<string>> => {
  const zip = await openPromise(path, { autoClose: true })
  const names: Array<string> = []
  for await (const entry of zip.eachEntry()) if (!entry.fileName.endsWith("/")) names.push(entry.fileName)
  return names
}

/**
 * The uncompressed bytes of one file of a zip, read from disk piece by piece. The zip is opened again for each file
 * and closed when the stream ends, so a caller that lists a zip and reads some of its files later holds nothing open.
 */
export const openZipEntry = async (path: string, name: string): Promise<Readable> => {
  const zip = await openPromise(path, { autoClose: true })
  for await (const entry of zip.eachEntry()) {
    // The stream holds the file open until it ends; leaving the loop only ends the listing.
    if (entry.fileName === name) return zip.openReadStreamPromise(entry)
  }
  throw new Error(`${path} holds no file ${name}`)
}
