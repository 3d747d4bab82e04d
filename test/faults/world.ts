/**
 * The world the fault tests run the built service in: real PostgreSQL behind our TCP proxy, the fake model, the
 * fake card processor, a local chain behind an RPC proxy, and a tally of every answer the service gave.
 */
import { execFile } from "node:child_process"
import { createHash, randomBytes, randomUUID } from "node:crypto"
import { mkdirSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { Effect, Exit, Scope } from "effect"
import type { Address } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { newCreditKey } from "../../src/credits/keys.ts"
import { type LocalChain, startChain } from "../support/chain.ts"
import { query, realPostgresUrl } from "../support/database.ts"
import { type FakeOpenAI, Reply, startFakeOpenAI } from "../support/fakeOpenAI.ts"
import { type FakeStripe, startFakeStripe } from "../support/fakeStripe.ts"
import { isRecord } from "../support/http.ts"
import { makeImage } from "../support/images.ts"
import { chickenRice } from "../support/meals.ts"
import { type PgProxy, startPgProxy } from "../support/pgProxy.ts"
import { root, type Served, serveProcess } from "../support/process.ts"
import { challengeOf, header, signPayment } from "../support/x402.ts"
import { type RpcFaults, startRpcFaults } from "./rpcFaults.ts"

export const PRICE = 10_000n

/** An attempt's lease with the world's settings: analysis 3 s + confirmation 1 s + the 60 s margin. */
export const LEASE_MS = 64_000

const buildLock = join(tmpdir(), `morsel-faults-build-${createHash("sha256").update(root).digest("hex").slice(0, 12)}`)

/** Builds the command the tests run, unless it is already up to date; one fault file at a time (they run in parallel). */
export const buildOnce = async () => {
  for (;;) {
    try {
      mkdirSync(buildLock)
      break
    } catch {
      // Another file builds; a lock left by a killed run is stale after ten minutes.
      if (Date.now() - (statSync(buildLock, { throwIfNoEntry: false })?.mtimeMs ?? 0) > 600_000) rmSync(buildLock, { recursive: true, force: true })
      await sleep(500)
    }
  }
  try {
    await promisify(execFile)(process.execPath, ["bin/build-if-stale.js"], { cwd: root })
  } finally {
    rmSync(buildLock, { recursive: true, force: true })
  }
}

export { query }

const withSearchPath = (url: string, schema: string) => {
  const u = new URL(url)
  u.searchParams.set("options", `-c search_path=${schema}`)
  return u.toString()
}

export interface Answer {
  readonly status: number
  readonly code: string | undefined
  readonly retryAfter: string | null
  readonly ms: number
  readonly body: unknown
  readonly headers: Headers
}

/** Every answer the service gave in a test, and the ones it never gave (a hang past the deadline, a reset). */
export class Tally {
  readonly answers: Array<Answer & { readonly what: string }> = []
  readonly hung: Array<string> = []
  readonly unreachable: Array<string> = []
  byStatus() {
    const counts: Record<string, number> = {}
    for (const a of this.answers) {
      const label = a.code === undefined || a.status < 400 ? String(a.status) : `${a.status} ${a.code}`
      counts[label] = (counts[label] ?? 0) + 1
    }
    return counts
  }
  longestMs() {
    return Math.max(0, ...this.answers.map((a) => a.ms))
  }
  /** Answers outside what the service promises under a fault: a 2xx, a documented 4xx, or 503 with Retry-After and a code. */
  broken(allowed: ReadonlyArray<number> = []) {
    return this.answers.filter((a) => {
      if (a.status < 300 || allowed.includes(a.status)) return false
      if (a.status === 503) return a.retryAfter === null || !/^\d+$/.test(a.retryAfter) || a.code === undefined
      return true
    })
  }
  summary() {
    return `${this.answers.length + this.hung.length + this.unreachable.length} requests, answers ${JSON.stringify(this.byStatus())}, ` +
      `${this.hung.length} hung, ${this.unreachable.length} unreachable, longest answer ${this.longestMs()} ms`
  }
}

/** A request with a deadline: its answer goes to the tally, a hang or a connection failure too. */
export const call = async (
  tally: Tally,
  what: string,
  url: string,
  init: { readonly headers?: Record<string, string>; readonly body?: unknown; readonly deadlineMs?: number } = {}
): Promise<Answer | undefined> => {
  const started = Date.now()
  try {
    const response = await fetch(url, {
      method: init.body === undefined ? "GET" : "POST",
      headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(init.deadlineMs ?? 20_000)
    })
    const text = await response.text()
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      body = text
    }
    const error = isRecord(body) && isRecord(body["error"]) ? body["error"] : undefined
    const answer: Answer = {
      status: response.status,
      code: typeof error?.["code"] === "string" ? error["code"] : undefined,
      retryAfter: response.headers.get("retry-after"),
      ms: Date.now() - started,
      body,
      headers: response.headers
    }
    tally.answers.push({ ...answer, what })
    return answer
  } catch (e) {
    if (e instanceof Error && e.name === "TimeoutError") tally.hung.push(`${what} after ${Date.now() - started} ms`)
    else tally.unreachable.push(`${what}: ${e instanceof Error ? String(e.cause ?? e.message) : String(e)}`)
    return undefined
  }
}

export interface WorldOptions {
  readonly env?: Readonly<Record<string, string>>
  readonly payers?: number
}

export interface World {
  readonly proxy: PgProxy
  readonly rpc: RpcFaults
  readonly stripe: FakeStripe
  readonly model: FakeOpenAI
  readonly chain: LocalChain
  /** The test's own schema on the real server, reached directly (for invariants). */
  readonly directUrl: string
  readonly env: Readonly<Record<string, string>>
  readonly photo: { readonly base64: string; readonly mime: "image/jpeg" | "image/png" }
  readonly start: (extra?: Readonly<Record<string, string>>, port?: number) => Promise<Served>
  readonly close: () => Promise<void>
}

/** Settings that keep limits out of the way of a fault test: refusals for capacity are not the subject. */
export const roomyLimits: Readonly<Record<string, string>> = {
  LIMIT_GLOBAL_PER_DAY: "100000",
  LIMIT_GLOBAL_PER_HOUR: "100000",
  LIMIT_PAYER_PER_DAY: "100000",
  LIMIT_CONCURRENT: "64",
  LIMIT_X402_PER_DAY: "100000",
  LIMIT_X402_PER_HOUR: "100000",
  LIMIT_X402_CONCURRENT: "64",
  LIMIT_FAILURES_PER_DAY: "100000",
  LIMIT_CREDITS_PER_KEY_PER_MINUTE: "100000",
  LIMIT_CREDITS_GLOBAL_PER_MINUTE: "100000"
}

export const startWorld = async (options: WorldOptions = {}): Promise<World> => {
  if (realPostgresUrl === undefined) throw new Error("the fault suite needs TEST_DATABASE_URL")
  const adminUrl = realPostgresUrl
  const schema = `t_${randomBytes(6).toString("hex")}`
  await query(realPostgresUrl, `CREATE SCHEMA ${schema}`)
  const directUrl = withSearchPath(realPostgresUrl, schema)
  const scope = Effect.runSync(Scope.make())
  const model = await Effect.runPromise(Scope.extend(startFakeOpenAI(), scope))
  model.setFallback(Reply.answer(chickenRice))
  const [stripe, chain, proxy] = await Promise.all([startFakeStripe(), startChain({ payers: options.payers ?? 4 }), startPgProxy(directUrl)])
  const rpc = await startRpcFaults(chain.rpcUrl)
  const photo = await makeImage(320, 240, "jpeg")
  const env = {
    DATABASE_URL: proxy.url(directUrl),
    OPENAI_API_KEY: "sk-fake",
    OPENAI_BASE_URL: model.url,
    VISION_MODEL: "fake-vision-1",
    ...stripe.env,
    ...chain.env,
    X402_RPC_URL: rpc.url,
    PUBLIC_BASE_URL: "https://morsel.example",
    ANALYSIS_TIMEOUT_MS: "3000",
    X402_CONFIRM_TIMEOUT_MS: "1000",
    LOG_LEVEL: "warning",
    LOG_FORMAT: "json",
    ...roomyLimits,
    ...options.env
  }
  const running = new Set<Served>()
  return {
    proxy,
    rpc,
    stripe,
    model,
    chain,
    directUrl,
    env,
    photo,
    start: async (extra = {}, port) => {
      const served = await serveProcess([], { ...env, ...extra }, port)
      running.add(served)
      served.child.once("exit", () => running.delete(served))
      return served
    },
    close: async () => {
      await Promise.all([...running].map((s) => s.stop()))
      await Promise.all([proxy.close(), rpc.close(), stripe.close(), chain.close()])
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await query(adminUrl, `DROP SCHEMA ${schema} CASCADE`).catch(() => undefined)
    }
  }
}

/** A key with 500 credits, bought through checkout, the fake processor and confirm. */
export const boughtKey = async (url: string, stripe: FakeStripe) => {
  const key = newCreditKey(true)
  const auth = { authorization: `Bearer ${key}` }
  const tally = new Tally()
  const checkout = await call(tally, "checkout", `${url}/v1/credits/checkout`, { headers: auth, body: { order_id: randomUUID() } })
  const sessionId = isRecord(checkout?.body) ? checkout.body["session_id"] : undefined
  if (typeof sessionId !== "string") throw new Error(`checkout failed: ${JSON.stringify(checkout?.body)}`)
  stripe.pay(sessionId)
  const confirm = await call(tally, "confirm", `${url}/v1/credits/confirm`, { headers: auth, body: { session_id: sessionId } })
  if (!isRecord(confirm?.body) || confirm.body["credits_remaining"] !== 500) throw new Error(`confirm failed: ${JSON.stringify(confirm?.body)}`)
  return key
}

/** A signed x402 payment for one analysis, from the service's own challenge: the PAYMENT-SIGNATURE header value. */
export const paymentFor = async (url: string, payer: PrivateKeyAccount, body: unknown) => {
  const response = await fetch(`${url}/v1/analyze`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": `challenge-${randomUUID()}` },
    body: JSON.stringify(body)
  })
  await response.arrayBuffer()
  const required = response.headers.get("payment-required")
  if (response.status !== 402 || required === null) throw new Error(`no challenge: ${response.status}`)
  return header(await signPayment(payer, challengeOf(required)))
}

/** The state the invariants are checked on, read straight from the test's schema. */
export const ledger = async (directUrl: string) => {
  const accounts = await query<{ fingerprint: string; available: number; reserved: number; entries_available: string; entries_reserved: string; grants: string; reversals: string; restorations: string; consumed: string }>(
    directUrl,
    `SELECT a.fingerprint, a.available, a.reserved,
            COALESCE(SUM(e.available_delta), 0) AS entries_available, COALESCE(SUM(e.reserved_delta), 0) AS entries_reserved,
            COUNT(*) FILTER (WHERE e.kind = 'grant') AS grants, COUNT(*) FILTER (WHERE e.kind = 'reversal') AS reversals,
            COUNT(*) FILTER (WHERE e.kind = 'restoration') AS restorations, COUNT(*) FILTER (WHERE e.kind = 'consume') AS consumed
     FROM credit_accounts a LEFT JOIN credit_entries e ON e.fingerprint = a.fingerprint GROUP BY a.fingerprint`
  )
  return accounts.map((a) => ({
    fingerprint: a.fingerprint,
    available: Number(a.available),
    reserved: Number(a.reserved),
    entriesAvailable: Number(a.entries_available),
    entriesReserved: Number(a.entries_reserved),
    grants: Number(a.grants),
    reversals: Number(a.reversals),
    restorations: Number(a.restorations),
    consumed: Number(a.consumed)
  }))
}

/** Token transfers from the payers to the seller, by transaction. */
export const transfersTo = async (chain: LocalChain, payers: ReadonlyArray<Address>) =>
  (await Promise.all(payers.map((p) => chain.transfers(p, chain.accounts.payTo.address)))).flat()

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
