/** The admin interface's contract (@effect/rpc): procedures, their payloads and answers; shared by the server and `morsel admin`. */
import { Rpc, RpcGroup } from "@effect/rpc"
import { Schema } from "effect"

/** Where the admin RPC is served (POST, JSON serialization). */
export const ADMIN_RPC_PATH = "/admin/rpc"

/** Leading hex characters of a key fingerprint shown to operators; enough to name one key, never the key itself. */
export const FINGERPRINT_PREFIX_LENGTH = 16

/** A refused admin call: `not_found`, `ambiguous_fingerprint` or `storage_unavailable`. */
export class AdminFailure extends Schema.TaggedError<AdminFailure>()("AdminFailure", {
  code: Schema.Literal("not_found", "ambiguous_fingerprint", "storage_unavailable"),
  message: Schema.String
}) {}

export const PausedKey = Schema.Struct({
  fingerprint_prefix: Schema.String,
  /** Credits on the key; below zero when a reversal took back credits already spent. */
  available: Schema.Number,
  reserved: Schema.Number,
  reason: Schema.NullOr(Schema.String),
  paused_at: Schema.DateTimeUtc,
  reversed_order_ids: Schema.Array(Schema.String)
})
export type PausedKey = typeof PausedKey.Type

export const UnblockedKey = Schema.Struct({
  fingerprint_prefix: Schema.String,
  available: Schema.Number,
  /** False when the key was not paused (nothing changed). */
  was_blocked: Schema.Boolean
})

export const PendingSettlement = Schema.Struct({
  request_id: Schema.String,
  payer: Schema.String,
  amount: Schema.String,
  asset: Schema.String,
  network: Schema.String,
  payment_state: Schema.String,
  tx_hash: Schema.NullOr(Schema.String),
  attempts: Schema.Number,
  /** The authorization cannot be spent after this time. */
  valid_until: Schema.DateTimeUtc,
  created_at: Schema.DateTimeUtc,
  updated_at: Schema.DateTimeUtc
})
export type PendingSettlement = typeof PendingSettlement.Type

export const ReconcileResult = Schema.Struct({
  examined: Schema.Number,
  settled: Schema.Array(Schema.String),
  failed: Schema.Array(Schema.Struct({ request_id: Schema.String, reason: Schema.String })),
  still_pending: Schema.Number
})

/** Token counts as the provider reported them; a count it did not report is absent. */
export const ModelTokens = Schema.Struct({
  prompt: Schema.optional(Schema.Number),
  completion: Schema.optional(Schema.Number),
  reasoning: Schema.optional(Schema.Number),
  cached: Schema.optional(Schema.Number)
})

/** What the request's vision model call used; `cost_usd` only when prices were set at the time. */
export const ModelCallSummary = Schema.Struct({
  tokens: ModelTokens,
  seconds: Schema.Number,
  /** `json_schema` (strict structured output), `json_object` (JSON mode) or `text`. */
  output: Schema.String,
  cost_usd: Schema.optional(Schema.Number)
})

export const RequestSummary = Schema.Struct({
  request_id: Schema.String,
  status: Schema.Literal("running", "paid", "failed", "payment_pending"),
  payer_kind: Schema.Literal("credit", "x402"),
  /** `key:<fingerprint prefix>` or `wallet:<address>`. */
  payer: Schema.String,
  created_at: Schema.DateTimeUtc,
  completed_at: Schema.NullOr(Schema.DateTimeUtc),
  failure_code: Schema.NullOr(Schema.String),
  result_stored: Schema.Boolean,
  payment: Schema.NullOr(Schema.Struct({ state: Schema.String, tx_hash: Schema.NullOr(Schema.String) })),
  /** Absent when no model answer came back (refused before the model, or the provider failed). */
  model_call: Schema.optional(ModelCallSummary)
})
export type RequestSummary = typeof RequestSummary.Type

export const Counters = Schema.Struct({
  since: Schema.DateTimeUtc,
  /** Analysis attempts started in the last 24 hours, by their current status. */
  requests_last_24h: Schema.Struct({
    running: Schema.Number,
    paid: Schema.Number,
    failed: Schema.Number,
    payment_pending: Schema.Number
  }),
  credits: Schema.Struct({
    granted_last_24h: Schema.Number,
    consumed_last_24h: Schema.Number,
    granted_total: Schema.Number,
    consumed_total: Schema.Number
  }),
  x402: Schema.Struct({ settled_last_24h: Schema.Number, settled_total: Schema.Number }),
  /** The vision model's usage and, with MODEL_PRICE_* set, its cost against the price of the analyses it served. */
  model: Schema.optional(
    Schema.Struct({
      calls_last_24h: Schema.Number,
      tokens_last_24h: ModelTokens,
      /** Calls with a cost (prices were set); the margin counts only these. */
      priced_calls_last_24h: Schema.Number,
      cost_usd_last_24h: Schema.optional(Schema.Number),
      /** 0.01 USD for each priced call whose analysis was paid. */
      revenue_usd_last_24h: Schema.optional(Schema.Number),
      margin_usd_last_24h: Schema.optional(Schema.Number),
      cost_usd_total: Schema.optional(Schema.Number),
      margin_usd_total: Schema.optional(Schema.Number)
    })
  )
})
export type Counters = typeof Counters.Type

/** A key fingerprint or a prefix long enough to be unlikely shared. */
export const FingerprintArg = Schema.String.pipe(
  Schema.pattern(/^[0-9a-f]{8,64}$/, { message: () => "a key fingerprint or a prefix of it: 8 to 64 lowercase hex characters" })
)

export class AdminRpcs extends RpcGroup.make(
  Rpc.make("ListPausedKeys", { success: Schema.Array(PausedKey), error: AdminFailure }),
  Rpc.make("UnblockKey", { payload: { fingerprint: FingerprintArg }, success: UnblockedKey, error: AdminFailure }),
  Rpc.make("ListPendingSettlements", { success: Schema.Array(PendingSettlement), error: AdminFailure }),
  Rpc.make("ReconcileNow", { success: ReconcileResult, error: AdminFailure }),
  Rpc.make("LookupRequest", { payload: { request_id: Schema.UUID }, success: RequestSummary, error: AdminFailure }),
  Rpc.make("Counters", { success: Counters, error: AdminFailure })
) {}
