// How `morsel serve` runs: the Node options and environment variables a server is started with (bin/morsel.js).

/**
 * A server holds about 100 MiB less at idle with a young generation of 1 MiB semi-spaces and with glibc's malloc
 * giving freed blocks back. Setting the trim threshold also keeps the mmap threshold at its 128 KiB default: it
 * otherwise rises to 32 MiB, and the embedded database's files, JavaScript buffers of every size, then stay in a heap
 * that is never trimmed. A lower mmap threshold (64 KiB) made every 64 KiB socket read and every libvips buffer of a
 * photo a fresh mapping, about 4 ms of an analysis, for no lower peak. One malloc arena, where glibc gives each
 * thread that allocates (libvips' workers among them) an arena of its own: three concurrent photos peaked about
 * 9 MiB lower, and analyses took 59–72 ms where they took 71–87 ms, side by side on the same tree. Node and glibc
 * read all three at start only.
 */
export const SERVE_NODE_OPTIONS = ["--max-semi-space-size=1"]
export const SERVE_ENV = { MALLOC_TRIM_THRESHOLD_: "131072", MALLOC_ARENA_MAX: "1" }

/** Whether this process was started with them (as options, or in NODE_OPTIONS). */
export const tuned = () =>
  Object.keys(SERVE_ENV).every((name) => process.env[name] !== undefined) &&
  SERVE_NODE_OPTIONS.every((option) =>
    [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)].some((arg) => arg.split("=")[0] === option.split("=")[0])
  )
