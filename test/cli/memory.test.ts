// The memory a started server keeps: the heap a start leaves is compacted and given back at once.
import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { SERVE_NODE_OPTIONS } from "../../bin/tuning.js"
import { root } from "../support/process.ts"

describe("the start's garbage", () => {
  it("leaves V8 holding little more heap than the objects still in use", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [...SERVE_NODE_OPTIONS, "--import", "tsx", join(root, "test/support/startGarbage.ts")],
      { cwd: root }
    )
    const heap = JSON.parse(stdout) as { committed: number; used: number; kept: number }
    expect(heap.kept).toBe(40_000)
    // Without compaction V8 keeps about 60 MiB of pages the dropped nine tenths were spread over.
    expect(heap.committed - heap.used).toBeLessThan(8)
  }, 60_000)
})
