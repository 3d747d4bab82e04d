import { configDefaults, defineConfig } from "vitest/config"
import { storageTestFiles } from "./test/support/storageFiles.ts"

/**
 * The slow part of the suite, by folder or file (a new test file in a folder named here joins it): the browser
 * (test/web), the command run as a process (test/cli, the sandbox's `serve`, `morsel model check`, the client's
 * consumer project), servers racing for data folders while other processes keep every core busy, fault injection
 * (test/faults, which needs TEST_DATABASE_URL), and the long runs: a server kept through a day on the test clock
 * (replays, the fast lane, the sweeper), real seconds of retries and deadlines, storms of concurrent requests against
 * the limits (test/limits, made-up keys, the food calls' limit and lane, who has a photo file fetched), the ledger
 * and the settler's nonces, a seeded random run, bodies of 3 MB to 1 GB, bodies sent slowly while they are refused,
 * the slowest food texts we could build, the client end to end with phone photos (test/client), the embedded
 * database's folders and the full SR28 import, and the servers with many parts (settlement on a local chain, the
 * admin RPC, the MCP revisions, the request log, property runs of the body reader), and the longest of the rest (the
 * analysis pipeline's photos, x402's seam and recovery and paid MCP calls, photo files over MCP, the food paths over
 * HTTP, the matcher's dev set, the model's usage log). `npm test` runs the rest ("quick", about 5 minutes on 2 cores); `npm run test:slow` these; `npx vitest
 * run` both.
 */
const SLOW = [
  "test/web/**",
  "test/cli/**",
  "test/faults/**",
  "test/limits/**",
  "test/client/**",
  "test/sandbox/serve.test.ts",
  "test/model/check.test.ts",
  "test/db/dataFolderLock.test.ts",
  "test/db/embedded.test.ts",
  "test/db/socketFolder.test.ts",
  "test/analysis/lifecycle.test.ts",
  "test/analysis/sweeper.test.ts",
  "test/analysis/providerFailures.test.ts",
  "test/http/fastLane.test.ts",
  "test/credits/analyze.test.ts",
  "test/credits/unknownKeys.test.ts",
  "test/credits/unknownKeysAnalyze.test.ts",
  "test/credits/randomized.test.ts",
  "test/x402/nonces.test.ts",
  "test/http/tooLargeBodies.test.ts",
  "test/x402/e2e.test.ts",
  "test/foods/import.test.ts",
  "test/foods/lane.test.ts",
  "test/foods/limits.test.ts",
  "test/foods/bounds.test.ts",
  "test/credits/unknownKeysFoods.test.ts",
  "test/mcp/imageFileCallers.test.ts",
  "test/mcp/protocol.test.ts",
  "test/http/earlyRefusals.test.ts",
  "test/http/liftedImage.test.ts",
  "test/x402/settlement.test.ts",
  "test/admin/rpc.test.ts",
  "test/observability/requestLog.test.ts",
  "test/analysis/pipeline.test.ts",
  "test/x402/seam.test.ts",
  "test/x402/recovery.test.ts",
  "test/mcp/x402.test.ts",
  "test/mcp/imageFile.test.ts",
  "test/foods/http.test.ts",
  "test/foods/matcher.test.ts",
  "test/model/usage.test.ts"
]

const tests = (glob: string) => (glob.endsWith(".ts") ? glob : `${glob}/*.test.ts`)
const isSlow = (file: string) => SLOW.some((glob) => (glob.endsWith("/**") ? file.startsWith(glob.slice(0, -2)) : file === glob))

/**
 * With TEST_DATABASE_URL set (the PostgreSQL pass, `npm run test:postgres`), only the files whose database it chooses
 * run (test/support/storageFiles.ts): the others would repeat the embedded pass word for word.
 */
const onPostgres = process.env["TEST_DATABASE_URL"] !== undefined
const storage = onPostgres ? storageTestFiles(import.meta.dirname) : []
const quick = onPostgres ? storage.filter((file) => !isSlow(file)) : ["test/**/*.test.ts"]
const slow = onPostgres ? storage.filter(isSlow) : SLOW.map(tests)

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two test files at a time (`npm test` runs three: its files wait less on processes and browsers, more on the CPU).
    maxWorkers: 2,
    minWorkers: 1,
    sequence: { concurrent: false },
    // Every run gets a temporary directory of its own, which must be empty when it ends (test/support/tmpdir.ts).
    globalSetup: ["test/support/tmpdir.ts", "test/support/template.ts"],
    projects: [
      { extends: true, test: { name: "quick", include: quick, exclude: [...configDefaults.exclude, ...SLOW] } },
      // The long runs get four times the time: a day on the test clock wakes every periodic pass of a server.
      { extends: true, test: { name: "slow", include: slow, testTimeout: 120_000 } }
    ]
  }
})
