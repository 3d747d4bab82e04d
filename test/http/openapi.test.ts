// /openapi.json checked by tools nobody here wrote: the OpenAPI 3.1 JSON Schema and Redocly's recommended lint rules.
import { execFile } from "node:child_process"
import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Validator } from "@seriousme/openapi-schema-validator"
import { Effect, Layer } from "effect"
import { FundingMemory } from "../../src/analysis/FundingMemory.ts"
import { VisionModelLive } from "../../src/analysis/VisionModelLive.ts"
import { FoodDbEmpty } from "../../src/foods/core/FoodDbLive.ts"
import { LimitsUnlimited } from "../../src/limits/Limits.ts"
import { isRecord, send } from "../support/http.ts"
import { Server, serverLayer } from "../support/server.ts"

const ServerUnderTest = serverLayer({ dependencies: Layer.mergeAll(VisionModelLive, FoodDbEmpty, FundingMemory({}), LimitsUnlimited) })

const REDOCLY = join(import.meta.dirname, "../../node_modules/.bin/redocly")

/** The document as a client downloads it. */
const document = Effect.flatMap(Server, ({ url }) => Effect.promise(() => send(`${url}/openapi.json`))).pipe(
  Effect.map((answer) => {
    expect(answer.status).toBe(200)
    if (!isRecord(answer.body)) throw new Error("/openapi.json is not a JSON object")
    return answer.body
  })
)

interface Lint {
  readonly totals: { readonly errors: number; readonly warnings: number }
  readonly problems: ReadonlyArray<{ readonly ruleId: string; readonly message: string }>
}

/** `redocly lint` with the recommended rules on a temporary copy, offline: no telemetry, no update check. */
const lint = (spec: unknown) =>
  Effect.acquireUseRelease(
    Effect.promise(() => mkdtemp(join(tmpdir(), "morsel-openapi-"))),
    (dir) =>
      Effect.promise(async () => {
        const file = join(dir, "openapi.json")
        await writeFile(file, JSON.stringify(spec))
        const output = await new Promise<string>((resolve) =>
          execFile(
            REDOCLY,
            ["lint", file, "--extends", "recommended", "--format", "json"],
            { cwd: dir, env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" }, timeout: 120_000 },
            // It exits with 1 when it finds errors; the report says which.
            (_error, stdout) => resolve(stdout)
          )
        )
        return JSON.parse(output.slice(output.indexOf("{"))) as Lint
      }),
    (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
  )

type Operations = Record<string, Record<string, { responses: Record<string, unknown>; parameters?: ReadonlyArray<Record<string, unknown>>; security?: unknown }>>

describe("OpenAPI document", () => {
  it.layer(ServerUnderTest, { timeout: 120_000 })((it) => {
    it.effect("is valid against the OpenAPI 3.1 schema", () =>
      Effect.gen(function* () {
        const spec = yield* document
        const result = yield* Effect.promise(() => new Validator().validate(spec))
        expect(result).toEqual({ valid: true })
        expect(spec["openapi"]).toBe("3.1.0")
      }))

    it.effect("passes redocly lint with the recommended rules: no errors, no warnings", () =>
      Effect.gen(function* () {
        const report = yield* lint(yield* document)
        expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([])
        expect(report.totals).toMatchObject({ errors: 0, warnings: 0 })
      }), 180_000)

    it.effect("lists only answers that can happen, and lets the analyze call choose one way to pay", () =>
      Effect.gen(function* () {
        const spec = yield* document
        const paths = spec["paths"] as Operations
        const codes = (path: string, method: string) => Object.keys(paths[path]?.[method]?.responses ?? {}).sort()
        // Nothing to decode and no body: no 400, 413 or 415.
        expect(codes("/health", "get")).toEqual(["200", "403"])
        expect(codes("/v1/credits/balance", "get")).toEqual(["200", "401", "403", "409", "429", "503"])
        for (const path of ["/v1/analyze", "/v1/credits/checkout", "/v1/credits/confirm", "/v1/credits/checkout-status", "/v1/credits/feedback"]) {
          expect(codes(path, "post"), path).toEqual(expect.arrayContaining(["400", "413", "415"]))
        }
        // Schema rejections are answered with the InvalidRequest body, never HttpApi's own decode-error body.
        expect(JSON.stringify(spec)).not.toContain("HttpApiDecodeError")
        const analyze = paths["/v1/analyze"]?.["post"]
        // No credential first, so a "try it" page does not send a Bearer key next to a payment.
        expect(analyze?.security).toEqual([{}, { bearer: [] }])
        const parameters = analyze?.parameters ?? []
        expect(parameters.map((p) => p["name"]).sort()).toEqual(["idempotency-key", "payment-signature"])
        expect(parameters.find((p) => p["name"] === "payment-signature")).toMatchObject({ required: false })
        expect(parameters.find((p) => p["name"] === "payment-signature")).not.toHaveProperty("example")
        expect(spec["servers"]).toEqual([{ url: "/", description: "This server" }])
      }))
  })
})
