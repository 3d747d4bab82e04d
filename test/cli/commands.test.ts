// The client commands of `morsel` (key new, analyze, credits, admin) run as processes against a running test server
// with the fake Stripe and the fake model; they print what the server answered, and fail with exit code 1 when it refused.
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { FundingLive } from "../../src/server.ts"
import { fakeStripe, keyWith, rest } from "../support/clients.ts"
import { Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { startServer } from "../support/server.ts"

const root = join(import.meta.dirname, "../..")
const TOKEN = "cli-admin-token-0123456789abcdef"

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** `morsel …args` from the sources, with only PATH and the given variables in its environment. */
const morsel = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.async<Run>((resume) => {
    execFile(
      process.execPath,
      ["--import", "tsx", join(root, "src/cli.ts"), ...args],
      { cwd: root, env: { PATH: process.env["PATH"] ?? "", TMPDIR: process.env["TMPDIR"] ?? "/tmp", ...env }, timeout: 60_000 },
      (error, stdout, stderr) => resume(Effect.succeed({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }))
    )
  })

const json = (run: Run): unknown => JSON.parse(run.stdout)

describe("morsel client commands", () => {
  it.scopedLive("key new, credits balance and buy, analyze --key and admin print what the server answered", () =>
    Effect.gen(function* () {
      const stripe = yield* fakeStripe
      const fake = yield* startFakeOpenAI()
      fake.setFallback(Reply.answer(chickenRice))
      const { url } = yield* startServer({
        env: { ...stripe.env, OPENAI_API_KEY: "sk-fake", OPENAI_BASE_URL: fake.url, ADMIN_TOKEN: TOKEN },
        dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited)
      })
      const folder = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "morsel-cli-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const photo = join(folder, "lunch.jpg")
      writeFileSync(photo, Buffer.from((yield* Effect.promise(() => makeImage(320, 240, "jpeg"))).base64, "base64"))
      const key = yield* keyWith(url, stripe, 500)
      const base = ["--base-url", url]

      // Each process loads the CLI afresh (~2-3 s of CPU): two at a time, the fewest that show each command's behaviour.
      const [fresh, balance, analyzed, bought, wrongToken] = yield* Effect.all(
        [
          morsel(["key", "new", "--test"]),
          morsel(["credits", "balance", ...base, "--key", key, "--json"]),
          morsel(["analyze", photo, "--grams", "420", "--language", "lt", "--json", ...base], { MORSEL_API_KEY: key }),
          morsel(["credits", "buy", ...base, "--key", newCreditKey(false)]),
          morsel(["admin", "counters", ...base, "--token", "not-the-token"])
        ],
        { concurrency: 2 }
      )

      expect(fresh.stdout.trim()).toMatch(/^morsel_test_[0-9a-f]{64}$/)
      expect(json(balance)).toEqual({ credits_remaining: 500, blocked: false, test_mode: true })

      expect(analyzed.code, analyzed.stderr).toBe(0)
      const result = json(analyzed) as { request_id: string; estimate: boolean; estimated_total_grams: number }
      expect(result).toMatchObject({ estimate: true, estimated_total_grams: 420 })
      expect(fake.requests).toHaveLength(1)

      // A live-mode key on a test-mode server: the server's refusal is printed and the exit code is 1.
      expect(bought.code).toBe(1)
      expect(bought.stderr).toContain("HTTP 401 invalid_key")
      expect(wrongToken.code).toBe(1)
      expect(wrongToken.stderr).toContain("HTTP 401: invalid_admin_token")

      const [request, readable, broken, notFoods] = yield* Effect.all(
        [
          morsel(["admin", "request", result.request_id, ...base], { ADMIN_TOKEN: TOKEN }),
          morsel(["analyze", photo, ...base], { MORSEL_API_KEY: key }),
          morsel(["migrate"], { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" }),
          morsel(["fooddb", "import", folder], { MORSEL_DATA_DIR: "memory://" })
        ],
        { concurrency: 2 }
      )
      const words = yield* morsel(["credits", "balance", ...base, "--key", key])
      expect(json(request)).toMatchObject({ request_id: result.request_id, status: "paid", payer_kind: "credit", result_stored: true })

      // Without --json people get a table of the components with the totals, and words for the balance.
      expect(readable.code, readable.stderr).toBe(0)
      const lines = readable.stdout.split("\n")
      expect(lines[0]).toBe(chickenRice.dish_name)
      expect(lines[2]).toMatch(/^component\s+grams\s+kcal\s+protein g\s+carbs g\s+fat g\s+source$/)
      for (const item of chickenRice.items) expect(readable.stdout).toMatch(new RegExp(`^${item.name}\\s+${item.estimated_grams.toFixed(1)}\\s`, "m"))
      expect(readable.stdout).toMatch(/^total\s+340\.0\s/m)
      expect(readable.stdout).not.toContain("\u001b[")
      expect(words.stdout.trim()).toBe("498 credits (test mode)")

      // A failure is one line on stderr: no log lines, no stack trace.
      expect(broken.code).toBe(1)
      expect(broken.stdout).toBe("")
      expect(broken.stderr.trim().split("\n")).toHaveLength(1)
      expect(broken.stderr).toMatch(/^morsel: the database is unavailable \(check DATABASE_URL or MORSEL_DATA_DIR\)/)
      expect(notFoods.code).toBe(1)
      expect(notFoods.stderr.trim().split("\n")).toHaveLength(1)
      expect(notFoods.stderr).toContain("holds neither USDA SR28 ASCII files (FOOD_DES.txt, …) nor a FoodData Central CSV download")
    }), 300_000)

  it.scopedLive("credits balance of a key paused by a dispute names the operator's support contact", () =>
    Effect.gen(function* () {
      const stripe = yield* fakeStripe
      const { url } = yield* startServer({
        env: { ...stripe.env, OPERATOR_NAME: "Morsel Labs", SUPPORT_CONTACT: "help@morsel.example" },
        dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingLive, LimitsUnlimited)
      })
      const key = newCreditKey(true)
      const checkout = yield* rest(url, "/v1/credits/checkout", key, { order_id: crypto.randomUUID() })
      const sessionId = (checkout.body as { session_id: string }).session_id
      stripe.pay(sessionId)
      expect((yield* rest(url, "/v1/credits/confirm", key, { session_id: sessionId })).status).toBe(200)
      const disputed = yield* Effect.promise(() => stripe.sendWebhook(`${url}/webhooks/stripe`, stripe.events.disputeCreated(stripe.dispute(sessionId))))
      expect(disputed.status).toBe(200)

      const paused = yield* morsel(["credits", "balance", "--base-url", url, "--key", key])
      expect(paused.code, paused.stderr).toBe(0)
      expect(paused.stdout).toBe("0 credits, key paused pending support review (test mode)\ncontact Morsel Labs support at help@morsel.example\n")
    }), 120_000)
})
