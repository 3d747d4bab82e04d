/** The nonces of the self-settlement wallet, coordinated through PostgreSQL for every instance that settles with it. */
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Data, Duration, Effect, Option, Schedule, Schema } from "effect"
import type { Address, Hex } from "viem"
import { rowsOf } from "../db/rows.ts"
import type { RequestId } from "../domain/ids.ts"
import { Ids } from "../ids.ts"
import { ChainUnavailable, EvmChain } from "./EvmChain.ts"
import { HexString } from "./protocol.ts"

/** Another holder kept the settler's lease for longer than a submission may wait. */
export class SettlerBusy extends Data.TaggedError("SettlerBusy")<{ readonly settler: string }> {
  override get message() {
    return "another submission holds the settler wallet"
  }
}

/** The lease ran out and another holder took it: whatever was signed under it must not be sent. */
export class LeaseLost extends Data.TaggedError("LeaseLost")<{ readonly settler: string }> {
  override get message() {
    return "the settler wallet's lease passed to another submission"
  }
}

/** What a holder of the settler's lease may do. */
export interface SettlerLease {
  /** The nonce for a new transaction: the lowest gap if there is one, else the one after everything sent. */
  readonly next: Effect.Effect<number, ChainUnavailable | SqlError.SqlError>
  /** The lowest nonce we signed that the node neither mined nor holds: later transactions wait behind it. */
  readonly gap: Effect.Effect<Option.Option<number>, ChainUnavailable | SqlError.SqlError>
  /** Records the transaction signed for `nonce`, before it is broadcast; fails when the lease was lost. */
  readonly record: (nonce: number, txHash: Hex, requestId: Option.Option<RequestId>) => Effect.Effect<void, LeaseLost | SqlError.SqlError>
}

/** How long a holder keeps the wallet at most (a vanished instance frees it then). */
const LEASE = Duration.seconds(30)
/** How long a submission waits for the wallet before it is left for a later attempt. */
const WAIT = Duration.seconds(20)
/** Recorded nonces examined for a gap at most (more in flight at once is far beyond this service's rate). */
const SCAN = 64

/** A transaction recorded for a nonce; the nonce is an int8 column, so it arrives as a string. */
const recordedRows = rowsOf(
  Schema.Struct({
    nonce: Schema.NumberFromString,
    tx_hash: HexString
  })
)

export const makeSettlerNonces = (settler: Address) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* EvmChain
    const address = settler.toLowerCase()
    // Fibers of this instance queue here rather than polling the database for the lease.
    const local = yield* Effect.makeSemaphore(1)
    const at = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

    const count = (blockTag: "latest" | "pending") =>
      Effect.tryPromise({
        try: () => chain.client.getTransactionCount({ address: settler, blockTag }),
        catch: (cause) => new ChainUnavailable({ operation: `${blockTag} nonce lookup`, cause })
      })

    // Lease times are the database's own, so instances whose clocks differ still agree on who holds the wallet.
    const leaseEnd = sql`now() + ${Duration.toSeconds(LEASE)} * interval '1 second'`

    const take = (holder: string) =>
      Effect.gen(function* () {
        yield* sql`INSERT INTO x402_settlers (address) VALUES (${address}) ON CONFLICT DO NOTHING`
        const taken = yield* sql`
          UPDATE x402_settlers SET held_by = ${holder}, held_until = ${leaseEnd}
          WHERE address = ${address} AND (held_until IS NULL OR held_until < now())
          RETURNING address`
        return taken.length > 0
      })

    const acquire = (holder: string) =>
      take(holder).pipe(
        Effect.filterOrFail(
          (taken) => taken,
          () => new SettlerBusy({ settler: address })
        ),
        Effect.retry({ schedule: Schedule.spaced("25 millis").pipe(Schedule.upTo(WAIT)), while: (e) => e._tag === "SettlerBusy" })
      )

    const release = (holder: string) =>
      Effect.ignore(sql`UPDATE x402_settlers SET held_by = NULL, held_until = NULL WHERE address = ${address} AND held_by = ${holder}`)

    /** The chain's view (mined and pending counts) against what we recorded. */
    const view = Effect.gen(function* () {
      const [mined, pending] = yield* Effect.all([count("latest"), count("pending")], { concurrency: 2 })
      yield* sql`DELETE FROM x402_settler_transactions WHERE address = ${address} AND nonce < ${mined}`
      const rows = yield* recordedRows(sql`
        SELECT nonce, tx_hash FROM x402_settler_transactions
        WHERE address = ${address} AND nonce >= ${pending} ORDER BY nonce LIMIT ${SCAN}`)
      const byNonce = new Map(rows.map((r) => [r.nonce, r.tx_hash]))
      const last = rows.at(-1)
      const after = last === undefined ? pending : Math.max(pending, last.nonce + 1)
      // From the node's next nonce on, every nonce we signed must still be held by the node (some nodes count a
      // transaction priced below the base fee as not pending, yet hold it): the first that is not is a gap.
      for (let nonce = pending; nonce < after; nonce++) {
        const hash = byNonce.get(nonce)
        if (hash === undefined || !(yield* chain.knows(hash))) return { gap: Option.some(nonce), after }
      }
      return { gap: Option.none<number>(), after }
    })

    const leaseOf = (holder: string): SettlerLease => ({
      next: Effect.map(view, ({ after, gap }) => Option.getOrElse(gap, () => after)),
      gap: Effect.map(view, ({ gap }) => gap),
      record: (nonce, txHash, requestId) =>
        Effect.gen(function* () {
          const now = yield* at
          // Only while this holder still holds the lease: else another may have signed the same nonce meanwhile.
          const recorded = yield* sql`
            INSERT INTO x402_settler_transactions (address, nonce, tx_hash, request_id, signed_at)
            SELECT ${address}, ${nonce}, ${txHash}, ${Option.getOrNull(requestId)}, ${now}
            WHERE EXISTS (SELECT 1 FROM x402_settlers WHERE address = ${address} AND held_by = ${holder} AND held_until >= now())
            ON CONFLICT (address, nonce) DO UPDATE SET tx_hash = EXCLUDED.tx_hash, request_id = EXCLUDED.request_id, signed_at = EXCLUDED.signed_at
            RETURNING nonce`
          if (recorded.length === 0) return yield* Effect.fail(new LeaseLost({ settler: address }))
          // The broadcast follows: a fresh lease covers it, so no other holder takes this nonce for a gap meanwhile.
          yield* sql`UPDATE x402_settlers SET held_until = ${leaseEnd} WHERE address = ${address} AND held_by = ${holder}`
        })
    })

    return {
      /**
       * Runs `work` holding the settler's lease: one submission at a time across instances, from choosing the
       * nonce to broadcasting. No transaction stays open meanwhile; the lease is a row with an expiry.
       */
      exclusive: <A, E, R>(work: (lease: SettlerLease) => Effect.Effect<A, E, R>) =>
        local.withPermits(1)(
          Effect.acquireUseRelease(
            Ids.next.pipe(Effect.tap(acquire)),
            (holder) => work(leaseOf(holder)),
            release
          )
        )
    }
  })
