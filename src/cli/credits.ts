/** `morsel credits`: buy prepaid card credits and read the balance and orders of a key on a running server. */
import { randomUUID } from "node:crypto"
import { Command, Options } from "@effect/cli"
import { Console, Effect, Option, Schema } from "effect"
import { Balance, Health } from "../domain/schemas.ts"
import { baseUrlOf, baseUrlOption, bearer, jsonOption, keyOption, reportFailure, request, requireKey } from "./client.ts"
import { printBalance, printCheckout, printStatus } from "./output.ts"

const buy = Command.make(
  "buy",
  { baseUrl: baseUrlOption, key: keyOption, orderId: Options.text("order-id").pipe(Options.optional), json: jsonOption },
  (options) =>
    Effect.gen(function* () {
      const key = yield* requireKey(options.key)
      const orderId = Option.getOrElse(options.orderId, () => randomUUID())
      const reply = yield* request(`${baseUrlOf(options.baseUrl)}/v1/credits/checkout`, {
        method: "POST",
        headers: bearer(key),
        body: { order_id: orderId }
      })
      yield* printCheckout(reply.body, options.json)
      yield* Console.error(`keep the order_id (${orderId}) and ask: morsel credits status --order-id ${orderId}`)
    }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("Start (or, with --order-id, recover) a checkout of 500 credits for USD 5.00; prints checkout_url and order_id"))

const decodeHealth = Schema.decodeUnknownOption(Health)
const decodeBalance = Schema.decodeUnknownOption(Balance)

/** Whom to ask about a paused key, as the server's /health names its operator (the web page says the same). */
const supportOf = (baseUrl: string) =>
  request(`${baseUrl}/health`, { method: "GET" }).pipe(
    Effect.map(({ body }) =>
      Option.flatMap(decodeHealth(body), ({ operator }) =>
        Option.map(Option.fromNullable(operator.support_contact), (contact) => `contact ${operator.name === null ? "support" : `${operator.name} support`} at ${contact}`)
      )
    ),
    Effect.orElseSucceed(() => Option.none<string>())
  )

const balance = Command.make("balance", { baseUrl: baseUrlOption, key: keyOption, json: jsonOption }, (options) =>
  Effect.gen(function* () {
    const key = yield* requireKey(options.key)
    const baseUrl = baseUrlOf(options.baseUrl)
    const reply = yield* request(`${baseUrl}/v1/credits/balance`, { method: "GET", headers: bearer(key) })
    yield* printBalance(reply.body, options.json)
    if (!options.json && Option.exists(decodeBalance(reply.body), (b) => b.blocked)) {
      yield* Effect.flatMap(supportOf(baseUrl), Option.match({ onNone: () => Effect.void, onSome: (line) => Console.log(line) }))
    }
  }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("Credits remaining on the key and whether it is paused"))

const status = Command.make("status", { baseUrl: baseUrlOption, key: keyOption, orderId: Options.text("order-id"), json: jsonOption }, (options) =>
  Effect.gen(function* () {
    const key = yield* requireKey(options.key)
    const reply = yield* request(`${baseUrlOf(options.baseUrl)}/v1/credits/checkout-status`, {
      method: "POST",
      headers: bearer(key),
      body: { order_id: options.orderId }
    })
    yield* printStatus(reply.body, options.json)
  }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("State of an order (open, paid, expired, unresolved, not_issued, reversed); never creates a checkout"))

export const credits = Command.make("credits").pipe(Command.withSubcommands([buy, balance, status]), Command.withDescription("Prepaid card credits"))
