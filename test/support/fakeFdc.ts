/** A tiny FoodData Central search API on 127.0.0.1: answers /v1/foods/search from a fixed food list, counts calls, can refuse with 429. */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"

export interface FakeFdcFood {
  readonly fdcId: number
  readonly description: string
  readonly dataType: "Foundation" | "SR Legacy" | "Survey (FNDDS)"
  readonly kcal: number
  readonly protein: number
  readonly fat: number
  readonly carbs: number
}

export interface FakeFdc {
  readonly baseUrl: string
  /** Search queries received, in order. */
  readonly queries: Array<string>
  /** Answer every further search with 429 and this Retry-After (seconds). */
  refuseWith429: (retryAfterSeconds: number) => void
}

/** Starts the fake for the scope; only requests carrying `X-Api-Key: apiKey` are answered. */
export const fakeFdc = (apiKey: string, foods: ReadonlyArray<FakeFdcFood>) =>
  Effect.acquireRelease(
    Effect.async<FakeFdc & { close: () => void }>((resume) => {
      const queries: Array<string> = []
      let refusal: number | undefined
      const server = createServer((req, res) => {
        const url = new URL(req.url ?? "/", "http://127.0.0.1")
        if (req.headers["x-api-key"] !== apiKey) {
          res.writeHead(403, { "content-type": "application/json" }).end(JSON.stringify({ error: { code: "API_KEY_INVALID" } }))
          return
        }
        if (url.pathname !== "/v1/foods/search") {
          res.writeHead(404).end()
          return
        }
        const query = url.searchParams.get("query") ?? ""
        queries.push(query)
        if (refusal !== undefined) {
          res.writeHead(429, { "retry-after": String(refusal), "content-type": "application/json" }).end(JSON.stringify({ error: { code: "OVER_RATE_LIMIT" } }))
          return
        }
        const words = query.toLowerCase().split(/\s+/).filter((w) => w.length > 0)
        const hits = foods.filter((f) => words.some((w) => f.description.toLowerCase().includes(w)))
        res.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify({
            totalHits: hits.length,
            foods: hits.map((f) => ({
              fdcId: f.fdcId,
              description: f.description,
              dataType: f.dataType,
              foodNutrients: [
                { nutrientId: 1008, nutrientNumber: "208", nutrientName: "Energy", unitName: "KCAL", value: f.kcal },
                { nutrientId: 1062, nutrientNumber: "268", nutrientName: "Energy", unitName: "kJ", value: f.kcal * 4.184 },
                { nutrientId: 1003, nutrientNumber: "203", nutrientName: "Protein", unitName: "G", value: f.protein },
                { nutrientId: 1004, nutrientNumber: "204", nutrientName: "Total lipid (fat)", unitName: "G", value: f.fat },
                { nutrientId: 1005, nutrientNumber: "205", nutrientName: "Carbohydrate, by difference", unitName: "G", value: f.carbs }
              ]
            }))
          })
        )
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(
          Effect.succeed({
            baseUrl: `http://127.0.0.1:${port}`,
            queries,
            refuseWith429: (seconds: number) => {
              refusal = seconds
            },
            close: () => server.close()
          })
        )
      })
    }),
    (fake) => Effect.sync(() => fake.close())
  )
