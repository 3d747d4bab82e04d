/** The HTTP contract of the service, the single source of request validation and of /openapi.json. */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Context, type Redacted, Schema } from "effect"
import {
  AnalysisFailed,
  AnalysisTimeout,
  Conflict,
  Forbidden,
  Gone,
  InvalidRequest,
  NoFoodDetected,
  NotFound,
  PayloadTooLarge,
  PaymentRequired,
  ServiceUnavailable,
  TooManyRequests,
  Unauthorized,
  UnsupportedMediaType
} from "../domain/errors.ts"
import {
  AnalysisResult,
  AnalyzeRequest,
  Balance,
  CheckoutRequest,
  CheckoutResponse,
  CheckoutStatus,
  CheckoutStatusRequest,
  ConfirmRequest,
  FeedbackReceipt,
  FeedbackRequest,
  Health,
  IdempotencyKey
} from "../domain/schemas.ts"
import { FoodsGroup } from "../foods/faces/api.ts"

export const API_VERSION = "1.0.0"

/** The bearer credit key of a request, as sent; resolving it to an account is the credits feature's job. */
export class CreditKey extends Context.Tag("morsel/CreditKey")<CreditKey, Redacted.Redacted<string>>() {}

export class CreditKeyAuth extends HttpApiMiddleware.Tag<CreditKeyAuth>()("CreditKeyAuth", {
  provides: CreditKey,
  failure: Unauthorized,
  security: {
    bearer: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "Credit API key: morsel_live_ (morsel_test_ in test mode) + 64 lowercase hex")
    )
  }
}) {}

export const AnalyzeHeaders = Schema.Struct({
  "idempotency-key": IdempotencyKey,
  "payment-signature": Schema.optional(
    Schema.String.annotations({ description: "base64 JSON x402 v2 PaymentPayload; omit for a price challenge or with Bearer credits" })
  ),
  authorization: Schema.optional(
    Schema.String.annotations({ description: "Bearer <API_KEY> for credit funding" })
  )
})

/** What a route that takes a JSON body may answer before it runs: schema, size and content-type rejections. */
const BodyRejected = Schema.Union(InvalidRequest, PayloadTooLarge, UnsupportedMediaType)

export class HealthGroup extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/health")
      .addSuccess(Health)
      .annotate(OpenApi.Summary, "Service version and payment network")
  )
  .annotate(OpenApi.Description, "Liveness, version and which payment paths this server accepts") {}

export class AnalysisGroup extends HttpApiGroup.make("analysis")
  .add(
  HttpApiEndpoint.post("analyze", "/v1/analyze")
    .setHeaders(AnalyzeHeaders)
    .setPayload(AnalyzeRequest)
    .addSuccess(AnalysisResult)
    .addError(BodyRejected)
    .addError(Unauthorized)
    .addError(PaymentRequired)
    .addError(Conflict)
    .addError(Gone)
    .addError(NoFoodDetected)
    .addError(TooManyRequests)
    .addError(AnalysisFailed)
    .addError(ServiceUnavailable)
    .addError(AnalysisTimeout)
    .annotate(OpenApi.Summary, "Estimate the nutrition of one food photo")
    .annotate(
      OpenApi.Description,
      "Paid per call with x402 (PAYMENT-SIGNATURE; PAYMENT-RESPONSE on success) or with a Bearer credit key. Nothing is charged unless the analysis succeeds."
    )
  )
  .annotate(OpenApi.Description, "One food photo in, a nutrition estimate out: 0.01 USDC over x402 or one prepaid credit per success") {}

export class CreditsGroup extends HttpApiGroup.make("credits")
  .add(
    HttpApiEndpoint.get("balance", "/v1/credits/balance")
      .addSuccess(Balance)
      .addError(Conflict)
      .addError(TooManyRequests)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "Credits remaining on this key")
  )
  .add(
    HttpApiEndpoint.post("checkout", "/v1/credits/checkout")
      .setPayload(CheckoutRequest)
      .addSuccess(CheckoutResponse)
      .addError(BodyRejected)
      .addError(Conflict)
      .addError(TooManyRequests)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "Create (or recover) a hosted checkout for 500 credits at USD 5.00")
  )
  .add(
    HttpApiEndpoint.post("confirm", "/v1/credits/confirm")
      .setPayload(ConfirmRequest)
      .addSuccess(Balance)
      .addError(BodyRejected)
      .addError(Conflict)
      .addError(TooManyRequests)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "Verify a paid checkout session and recover the balance")
  )
  .add(
    HttpApiEndpoint.post("checkoutStatus", "/v1/credits/checkout-status")
      .setPayload(CheckoutStatusRequest)
      .addSuccess(CheckoutStatus)
      .addError(BodyRejected)
      .addError(NotFound)
      .addError(TooManyRequests)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "State of an order; never creates or expires a checkout")
  )
  .add(
    HttpApiEndpoint.post("feedback", "/v1/credits/feedback")
      .setPayload(FeedbackRequest)
      .addSuccess(FeedbackReceipt)
      .addError(BodyRejected)
      .addError(NotFound)
      .addError(Conflict)
      .addError(TooManyRequests)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "Rate one completed analysis (card keys only)")
  )
  .middleware(CreditKeyAuth)
  .annotate(OpenApi.Description, "Prepaid card credits for a Bearer key: buy 500 for USD 5.00, check the balance, rate results") {}

const header = (description: string, example: string) => ({ description, schema: { type: "string" }, example })

interface SchemaRef {
  readonly $ref?: string
  readonly anyOf?: ReadonlyArray<SchemaRef>
}

interface Response {
  description?: string
  headers?: Record<string, unknown>
  content?: Record<string, { schema?: SchemaRef }>
}

interface Operation {
  security?: ReadonlyArray<Record<string, ReadonlyArray<string>>>
  parameters?: ReadonlyArray<{ readonly name: string }>
  responses?: Record<string, Response>
}

type Paths = Record<string, Record<string, Operation>>

const DECODE_ERROR = "#/components/schemas/HttpApiDecodeError"

/**
 * The transport guard answers a schema rejection with the InvalidRequest body, so HttpApi's own decode-error body
 * never reaches a caller: it leaves the 400 answers, and the 400 of a route without input disappears.
 */
const withoutDecodeError = (paths: Paths) => {
  for (const operation of Object.values(paths).flatMap((item) => Object.values(item))) {
    const json = operation.responses?.["400"]?.content?.["application/json"]
    if (!operation.responses || !json?.schema) continue
    const rest = (json.schema.anyOf ?? [json.schema]).filter((member) => member.$ref !== DECODE_ERROR)
    const [only] = rest
    if (only === undefined) delete operation.responses["400"]
    else {
      json.schema = rest.length === 1 ? only : { anyOf: rest }
      operation.responses["400"] = { ...operation.responses["400"], description: "Invalid input; nothing consumed" }
    }
  }
}

/** Drops component schemas nothing refers to any more (the decode error and its parts). */
const withoutUnusedSchemas = (spec: Record<string, unknown>) => {
  const schemas = (spec["components"] as { schemas?: Record<string, unknown> } | undefined)?.schemas ?? {}
  for (;;) {
    const text = JSON.stringify(spec)
    const unused = Object.keys(schemas).filter((name) => !text.includes(`"#/components/schemas/${name}"`))
    if (unused.length === 0) return
    for (const name of unused) delete schemas[name]
  }
}

/**
 * What the schemas cannot say: the analyze endpoint takes either no credential or a Bearer key, answers carry
 * payment and retry headers, and the decode-error body of HttpApi is never sent.
 */
const documentTransport = (spec: Record<string, unknown>) => {
  const paths = (spec["paths"] ?? {}) as Paths
  const analyze = paths["/v1/analyze"]?.["post"]
  if (analyze) {
    analyze.security = [{}, { bearer: [] }]
    analyze.parameters = (analyze.parameters ?? []).filter((p) => p.name !== "authorization")
    const ok = analyze.responses?.["200"]
    if (ok) ok.headers = { "PAYMENT-RESPONSE": header("x402 only: base64 JSON settlement receipt (success, transaction, network, payer)", "eyJzdWNjZXNzIjp0cnVlfQ==") }
    const challenge = analyze.responses?.["402"]
    if (challenge) challenge.headers = { "PAYMENT-REQUIRED": header("base64 JSON x402 v2 PaymentRequired with an accepts array", "eyJ4NDAyVmVyc2lvbiI6Mn0=") }
  }
  for (const operation of Object.values(paths).flatMap((item) => Object.values(item))) {
    for (const status of ["429", "503"]) {
      const response = operation.responses?.[status]
      if (response) response.headers = { ...response.headers, "Retry-After": header("seconds to wait; a hint", "60") }
    }
  }
  withoutDecodeError(paths)
  withoutUnusedSchemas(spec)
  // The License annotation has no field for an SPDX identifier; a license needs a URL or one.
  const info = spec["info"] as Record<string, unknown>
  info["license"] = { name: "Proprietary", identifier: "LicenseRef-Proprietary" }
  return spec
}

export class MorselApi extends HttpApi.make("morsel")
  .add(HealthGroup)
  .add(AnalysisGroup)
  .add(CreditsGroup)
  .add(FoodsGroup)
  .addError(Forbidden)
  .annotate(OpenApi.Title, "morsel")
  .annotate(OpenApi.Transform, documentTransport)
  .annotate(OpenApi.Version, API_VERSION)
  // Relative: the server that serves this document, wherever it is deployed.
  .annotate(OpenApi.Servers, [{ url: "/", description: "This server" }])
  .annotate(
    OpenApi.Description,
    "Food-photo nutrition estimates. Every result is an estimate; model_confidence is uncalibrated. Public beta."
  ) {}
