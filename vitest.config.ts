import { configDefaults, defineConfig } from "vitest/config"

/**
 * The slow part of the suite, by folder (a new test file in one of them joins it): the browser (test/web), the
 * command run as a process (test/cli, the sandbox's `serve`, `morsel model check`, the client's consumer project),
 * servers racing for data folders while other processes keep every core busy, and fault injection (test/faults,
 * which needs TEST_DATABASE_URL). `npm test` runs the rest ("quick"); `npm run test:slow` these; `npx vitest run` both.
 */
const SLOW = [
  "test/web/**",
  "test/cli/**",
  "test/faults/**",
  "test/sandbox/serve.test.ts",
  "test/client/consumer.test.ts",
  "test/model/check.test.ts",
  "test/db/dataFolderLock.test.ts"
]

const tests = (glob: string) => (glob.endsWith(".ts") ? glob : `${glob}/*.test.ts`)

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two test files at a time: most of a file's time is spent waiting on its servers, browsers and chains.
    maxWorkers: 2,
    minWorkers: 1,
    sequence: { concurrent: false },
    // Every run gets a temporary directory of its own, which must be empty when it ends (test/support/tmpdir.ts).
    globalSetup: ["test/support/tmpdir.ts"],
    projects: [
      { extends: true, test: { name: "quick", include: ["test/**/*.test.ts"], exclude: [...configDefaults.exclude, ...SLOW] } },
      { extends: true, test: { name: "slow", include: SLOW.map(tests) } }
    ]
  }
})
