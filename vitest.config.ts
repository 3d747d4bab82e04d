import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two test files at a time: most of a file's time is spent waiting on its servers, browsers and chains.
    maxWorkers: 2,
    minWorkers: 1,
    sequence: { concurrent: false }
  }
})
