/** `morsel credits`: buy prepaid card credits and read the balance and orders of a key on a running server, through `morsel/client`. */
import { randomUUID } from "node:crypto"
import { Command, Options } from "@effect/cli"
import { Console, Effect, Option, Redacted } from "effect"
import { baseUrlOption, clientOf, jsonOption, keyOption, reportFailure, requireKey, use } from "./client.ts"
import { printBalance, printCheckout, printStatus } from "./output.ts"

/** The client of a command that needs the credit key. */
const keyedClient = (options: { readonly baseUrl: Option.Option<string>; readonly key: Option.Option<Redacted.Redacted> }) =>
  Effect.flatMap(requireKey(options.key), (key) => clientOf(options.baseUrl, { apiKey: Redacted.value(key) }))

const buy = Command.make(
  "buy",
  { baseUrl: baseUrlOption, key: keyOption, orderId: Options.text("order-id").pipe(Options.optional), json: jsonOption },
  (options) =>
    Effect.gen(function* () {
      const client = yield* keyedClient(options)
      const orderId = Option.getOrElse(options.orderId, () => randomUUID())
      const checkout = yield* use(client, (c) => c.checkout({ orderId }))
      yield* printCheckout(checkout, options.json)
      yield* Console.error(`keep the order_id (${orderId}) and ask: morsel credits status --order-id ${orderId}`)
    }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("Start (or, with --order-id, recover) a checkout of 500 credits for USD 5.00; prints checkout_url and order_id"))

const balance = Command.make("balance", { baseUrl: baseUrlOption, key: keyOption, json: jsonOption }, (options) =>
  Effect.gen(function* () {
    const client = yield* keyedClient(options)
    const reply = yield* use(client, (c) => c.balance())
    yield* printBalance(reply, options.json)
    if (!options.json && reply.blocked) {
      // Whom to ask about a paused key, as the server's /health names its operator (the web page says the same).
      const health = yield* Effect.option(use(client, (c) => c.health()))
      const contact = Option.flatMap(health, ({ operator }) => Option.fromNullable(operator?.support_contact))
      if (Option.isSome(contact)) {
        const name = Option.flatMap(health, ({ operator }) => Option.fromNullable(operator?.name))
        yield* Console.log(`contact ${Option.match(name, { onNone: () => "support", onSome: (n) => `${n} support` })} at ${contact.value}`)
      }
    }
  }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("Credits remaining on the key and whether it is paused"))

const status = Command.make("status", { baseUrl: baseUrlOption, key: keyOption, orderId: Options.text("order-id"), json: jsonOption }, (options) =>
  Effect.gen(function* () {
    const client = yield* keyedClient(options)
    yield* printStatus(yield* use(client, (c) => c.checkoutStatus(options.orderId)), options.json)
  }).pipe(reportFailure(options.json))
).pipe(Command.withDescription("State of an order (open, paid, expired, unresolved, not_issued, reversed); never creates a checkout"))

export const credits = Command.make("credits").pipe(Command.withSubcommands([buy, balance, status]), Command.withDescription("Prepaid card credits"))
