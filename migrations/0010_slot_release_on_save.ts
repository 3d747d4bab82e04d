/** An analysis's concurrency slot is released by the statement that ends its attempt, not by one more statement. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Whatever ends a running attempt (its result saved as paid or pending, its failure recorded, the sweeper
  // abandoning it) frees its slot in the same transaction: a finished analysis holds no slot, and one commit fewer
  // is waited for. The windows still count the admission; only the slot ends.
  yield* sql.unsafe(`
    CREATE FUNCTION release_limit_slot() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE limit_admissions SET released_at = COALESCE(NEW.completed_at, now())
      WHERE request_id = NEW.request_id AND released_at IS NULL;
      RETURN NULL;
    END
    $$`)
  yield* sql`
    CREATE TRIGGER analysis_requests_release_slot
    AFTER UPDATE OF status ON analysis_requests
    FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status <> 'running')
    EXECUTE FUNCTION release_limit_slot()`
})
