// `morsel serve --sandbox` with an own vision model and on a busy port, and `--wallet-key` against a server whose x402
// is off: what the person at the terminal sees.
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { generatePrivateKey } from "viem/accounts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { freePort, root } from "../support/process.ts"
import { startServer } from "../support/server.ts"

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const cli = [process.execPath, "--import", "tsx", join(root, "src/cli.ts")] as const
const onlyPath = { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp" }

const morsel = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.async<Run>((resume) => {
    execFile(cli[0], [...cli.slice(1), ...args], { cwd: root, env: { ...onlyPath, ...env }, timeout: 120_000 }, (error, stdout, stderr) =>
      resume(Effect.succeed({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }))
    )
  })

/** `morsel serve --sandbox` from the sources until the scope closes; its output so far, and its exit once it ends. */
const sandboxProcess = (env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      let output = ""
      const child: ChildProcess = spawn(cli[0], [...cli.slice(1), "serve", "--sandbox"], { cwd: root, env: { ...onlyPath, ...env }, stdio: ["ignore", "pipe", "pipe"] })
      child.stdout?.on("data", (chunk) => (output += chunk))
      child.stderr?.on("data", (chunk) => (output += chunk))
      const exited = new Promise<number>((resolve) => child.once("exit", (code) => resolve(code ?? 1)))
      return { child, output: () => output, exited }
    }),
    ({ child, exited }) =>
      Effect.promise(() => {
        if (child.exitCode === null) child.kill("SIGTERM")
        return exited
      })
  )

const waitFor = (output: () => string, text: string) =>
  Effect.promise(async () => {
    for (let i = 0; i < 1_200 && !output().includes(text); i++) await new Promise((resolve) => setTimeout(resolve, 100))
    return output()
  })

describe("morsel serve --sandbox and its clients", () => {
  it.scopedLive("with OPENAI_API_KEY the sandbox calls that model and says so; a second sandbox on its port says the port is taken", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      fake.setFallback(Reply.answer(chickenRice))
      const port = String(yield* Effect.promise(freePort))
      const url = `http://127.0.0.1:${port}`
      const sandbox = yield* sandboxProcess({ PORT: port, OPENAI_API_KEY: "sk-own-model", OPENAI_BASE_URL: fake.url, VISION_MODEL: "my-vision-1" })
      const banner = yield* waitFor(sandbox.output, "Try it")
      expect(banner).toContain(`morsel SANDBOX on ${url}`)
      expect(banner).toContain(`vision model  yours: my-vision-1 at ${fake.url} (OPENAI_API_KEY is set); payments stay simulated`)
      expect(banner).not.toContain("scripted")
      expect(banner).not.toContain("sk-own-model")

      const folder = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "morsel-sandbox-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const photo = join(folder, "lunch.png")
      const image = yield* Effect.promise(() => makeImage(320, 240, "png"))
      writeFileSync(photo, image.bytes)

      const [analyzed, busy] = yield* Effect.all(
        [
          morsel(["analyze", photo, "--wallet-key", generatePrivateKey(), "--json"], { MORSEL_BASE_URL: url, MORSEL_STATE_DIR: folder }),
          morsel(["serve", "--sandbox"], { PORT: port })
        ],
        { concurrency: 2 }
      )
      expect(analyzed.code, analyzed.stderr).toBe(0)
      expect(JSON.parse(analyzed.stdout)).toMatchObject({ model: "my-vision-1", dish_name: chickenRice.dish_name })
      expect(fake.requests).toHaveLength(1)
      expect(fake.requests[0]?.model).toBe("my-vision-1")
      expect(fake.requests[0]?.headers.authorization).toBe("Bearer sk-own-model")

      expect([busy.code, busy.stdout]).toEqual([1, ""])
      expect(busy.stderr).toBe(`morsel: port ${port} on 127.0.0.1 is already in use: stop the other server or set PORT\n`)
    }), 300_000)

  it.scopedLive("--wallet-key against a server without x402 shows the server's own words", () =>
    Effect.gen(function* () {
      const fake = yield* startFakeOpenAI()
      const { url } = yield* startServer({
        env: { OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url },
        dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited)
      })
      const folder = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "morsel-nox402-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const photo = join(folder, "lunch.jpg")
      const image = yield* Effect.promise(() => makeImage(320, 240))
      writeFileSync(photo, image.bytes)
      const paid = yield* morsel(["analyze", photo, "--base-url", url, "--wallet-key", generatePrivateKey()])
      expect(paid.code).toBe(1)
      expect(paid.stderr).toMatch(/^morsel: HTTP 402 x402_unavailable: .*X402_PAY_TO.*Nothing was charged\.\n$/)
      expect(paid.stderr).not.toContain("Failed to parse payment requirements")
      expect(fake.requests).toHaveLength(0)
    }), 120_000)
})
