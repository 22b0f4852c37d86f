-- name: backfill_session
-- Memory for a backfill task's transaction (before its first temporary table: temp_buffers
-- cannot change after). Its sorts of a task's rows and its two staging tables then stay in
-- memory instead of spilling to temporary files (measured: about a tenth of the task's time).
SELECT set_config('work_mem', %(work_mem)s, true), set_config('temp_buffers', %(temp_buffers)s, true);

-- name: backfill_keys_stage
-- A backfill task's keys: for finding which of its rows are new before checking them (pass 1),
-- and for claiming them in the transaction that enqueues the rows (pass 2).
CREATE TEMPORARY TABLE pqs_backfill_key (ord int NOT NULL, key bytea NOT NULL) ON COMMIT DROP;

-- name: backfill_keys_copy
-- The task's keys with their rows' positions (COPY: one stream).
COPY pg_temp.pqs_backfill_key (ord, key) FROM STDIN;

-- name: backfill_keys_new
-- Positions of the rows whose key no backfill has claimed yet (read only: the claim that
-- counts is backfill_keys_claim, in the transaction that enqueues).
SELECT coalesce(array_agg(s.ord ORDER BY s.ord), '{}'::int[]) AS ords
FROM pg_temp.pqs_backfill_key s
WHERE NOT EXISTS (SELECT 1 FROM backfill_keys b WHERE b.queue_id = %(queue_id)s AND b.key = s.key);

-- name: backfill_keys_any
-- Whether any backfill enqueued into the queue yet (if not, every row is new and pass 1 skips
-- the look-up; the claim when enqueueing decides all the same).
SELECT EXISTS (SELECT 1 FROM backfill_keys WHERE queue_id = %(queue_id)s) AS any;

-- name: backfill_keys_claim_all
-- Claim every key of the task, when no backfill had enqueued into the queue as the run began
-- (its keys are then all new as a rule): a plain insert in key order, as backfill_keys_claim's,
-- without looking for keys already there and without answering which it claimed: all of them.
-- When one is there after all (a retried task whose first attempt committed, a concurrent run),
-- it fails on backfill_keys_pkey, leaving nothing (the caller's savepoint), and the caller
-- claims with backfill_keys_claim instead.
INSERT INTO backfill_keys (queue_id, key)
SELECT %(queue_id)s, s.key
FROM pg_temp.pqs_backfill_key s
ORDER BY s.key;

-- name: backfill_keys_claim
-- Claim the task's keys and return the positions of the rows whose key this claimed: the rows
-- to enqueue. A key claimed before stays as it is: its row was enqueued (or found to be a
-- duplicate) by an earlier run, or by an earlier attempt of this task that committed. Keys are
-- inserted in key order (two backfills of the same rows wait for each other instead of
-- deadlocking); those already there are left out before the insert, so a re-run inserts
-- nothing. `{conflict}` is empty for a first try: a plain insert costs half of one with ON
-- CONFLICT (measured); when a concurrent backfill claimed one of the keys meanwhile, the insert
-- fails on backfill_keys_pkey and the caller tries again with ON CONFLICT DO NOTHING.
WITH claimed AS (
    INSERT INTO backfill_keys AS b (queue_id, key)
    SELECT %(queue_id)s, s.key
    FROM pg_temp.pqs_backfill_key s
    WHERE NOT EXISTS (SELECT 1 FROM backfill_keys o WHERE o.queue_id = %(queue_id)s AND o.key = s.key)
    ORDER BY s.key
    {conflict}
    RETURNING b.key
)
SELECT coalesce(array_agg(s.ord ORDER BY s.ord), ARRAY[]::int[]) AS ords
FROM pg_temp.pqs_backfill_key s
JOIN claimed c ON c.key = s.key;

-- name: backfill_stage_drop
-- Drop the rows a task staged as they arrived (message_stage_create's table) when its claim
-- found some of their keys claimed before: the task stages again only the rows it claimed.
DROP TABLE pg_temp.pqs_staged_entry;
