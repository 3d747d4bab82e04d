/** A minimal streaming zip reader (central directory + stored/deflated entries, zip64 sizes) on Node's fs and zlib. */
import { createReadStream } from "node:fs"
import { type FileHandle, open } from "node:fs/promises"
import { Readable } from "node:stream"
import { createInflateRaw } from "node:zlib"

export interface ZipEntry {
  readonly name: string
  readonly method: number
  readonly compressedSize: number
  readonly uncompressedSize: number
  readonly localHeaderOffset: number
}

export class ZipFormatError extends Error {
  override readonly name = "ZipFormatError"
}

const EOCD = 0x06054b50
const ZIP64_LOCATOR = 0x07064b50
const ZIP64_EOCD = 0x06064b50
const CENTRAL = 0x02014b50
const LOCAL = 0x04034b50
const MAX_32 = 0xffffffff

const readAt = async (file: FileHandle, position: number, length: number) => {
  const buffer = Buffer.alloc(length)
  const { bytesRead } = await file.read(buffer, 0, length, position)
  return buffer.subarray(0, bytesRead)
}

const safeNumber = (n: bigint) => {
  if (n > BigInt(Number.MAX_SAFE_INTEGER)) throw new ZipFormatError("zip offset beyond 2^53")
  return Number(n)
}

/** Lists the entries of a zip file from its central directory (only the directory is read, never the data). */
export const listZip = async (path: string): Promise<ReadonlyArray<ZipEntry>> => {
  const file = await open(path, "r")
  try {
    const { size } = await file.stat()
    // The end-of-central-directory record is within the last 22 + 65,535 (comment) bytes.
    const tailLength = Math.min(size, 22 + 0xffff)
    const tail = await readAt(file, size - tailLength, tailLength)
    let eocd = -1
    for (let i = tail.length - 22; i >= 0; i--) {
      if (tail.readUInt32LE(i) === EOCD) {
        eocd = i
        break
      }
    }
    if (eocd < 0) throw new ZipFormatError(`${path} is not a zip file (no end of central directory)`)
    let count = tail.readUInt16LE(eocd + 10)
    let directorySize = tail.readUInt32LE(eocd + 12)
    let directoryOffset = tail.readUInt32LE(eocd + 16)
    if (count === 0xffff || directorySize === MAX_32 || directoryOffset === MAX_32) {
      const locator = eocd - 20
      if (locator < 0 || tail.readUInt32LE(locator) !== ZIP64_LOCATOR) throw new ZipFormatError("zip64 locator missing")
      const record = await readAt(file, safeNumber(tail.readBigUInt64LE(locator + 8)), 56)
      if (record.readUInt32LE(0) !== ZIP64_EOCD) throw new ZipFormatError("zip64 end of central directory missing")
      count = safeNumber(record.readBigUInt64LE(32))
      directorySize = safeNumber(record.readBigUInt64LE(40))
      directoryOffset = safeNumber(record.readBigUInt64LE(48))
    }
    const directory = await readAt(file, directoryOffset, directorySize)
    const entries: Array<ZipEntry> = []
    let at = 0
    for (let n = 0; n < count; n++) {
      if (directory.readUInt32LE(at) !== CENTRAL) throw new ZipFormatError("corrupt central directory")
      const method = directory.readUInt16LE(at + 10)
      let compressedSize = directory.readUInt32LE(at + 20)
      let uncompressedSize = directory.readUInt32LE(at + 24)
      const nameLength = directory.readUInt16LE(at + 28)
      const extraLength = directory.readUInt16LE(at + 30)
      const commentLength = directory.readUInt16LE(at + 32)
      let localHeaderOffset = directory.readUInt32LE(at + 42)
      const name = directory.toString("utf8", at + 46, at + 46 + nameLength)
      // Zip64 extra field (id 1): the 64-bit values, in order, of the fields that were saturated.
      let extra = at + 46 + nameLength
      const extraEnd = extra + extraLength
      while (extra + 4 <= extraEnd) {
        const id = directory.readUInt16LE(extra)
        const length = directory.readUInt16LE(extra + 2)
        if (id === 1) {
          let field = extra + 4
          if (uncompressedSize === MAX_32) {
            uncompressedSize = safeNumber(directory.readBigUInt64LE(field))
            field += 8
          }
          if (compressedSize === MAX_32) {
            compressedSize = safeNumber(directory.readBigUInt64LE(field))
            field += 8
          }
          if (localHeaderOffset === MAX_32) localHeaderOffset = safeNumber(directory.readBigUInt64LE(field))
        }
        extra += 4 + length
      }
      entries.push({ name, method, compressedSize, uncompressedSize, localHeaderOffset })
      at = extraEnd + commentLength
    }
    return entries
  } finally {
    await file.close()
  }
}

/** A stream of one entry's uncompressed bytes, read from disk piece by piece. */
export const openZipEntry = async (path: string, entry: ZipEntry): Promise<Readable> => {
  if (entry.method !== 0 && entry.method !== 8) {
    throw new ZipFormatError(`${entry.name}: compression method ${entry.method} is not supported (only stored and deflate)`)
  }
  const file = await open(path, "r")
  let header: Buffer
  try {
    header = await readAt(file, entry.localHeaderOffset, 30)
  } finally {
    await file.close()
  }
  if (header.length < 30 || header.readUInt32LE(0) !== LOCAL) throw new ZipFormatError(`${entry.name}: corrupt local header`)
  const start = entry.localHeaderOffset + 30 + header.readUInt16LE(26) + header.readUInt16LE(28)
  if (entry.compressedSize === 0) return Readable.from([])
  const raw = createReadStream(path, { start, end: start + entry.compressedSize - 1, highWaterMark: 1 << 20 })
  if (entry.method === 0) return raw
  const inflate = createInflateRaw()
  raw.on("error", (error) => inflate.destroy(error))
  return raw.pipe(inflate)
}
