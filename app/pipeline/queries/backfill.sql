-- name: backfill_keys_stage
-- A backfill task's keys, for finding which of its rows are new before checking them.
CREATE TEMPORARY TABLE pqs_backfill_key (ord int NOT NULL, key bytea NOT NULL) ON COMMIT DROP;

-- name: backfill_keys_copy
-- The task's keys with their rows' positions (COPY: one stream).
COPY pg_temp.pqs_backfill_key (ord, key) FROM STDIN;

-- name: backfill_keys_new
-- Positions of the rows whose key no backfill has claimed yet (read only: the claim that
-- counts is message_stage_claim, in the transaction that enqueues).
SELECT coalesce(array_agg(s.ord ORDER BY s.ord), '{}'::int[]) AS ords
FROM pg_temp.pqs_backfill_key s
WHERE NOT EXISTS (SELECT 1 FROM backfill_keys b WHERE b.queue_id = %(queue_id)s AND b.key = s.key);

-- name: backfill_keys_any
-- Whether any backfill enqueued into the queue yet (if not, every row is new and pass 1 skips
-- the look-up; the claim when enqueueing decides all the same).
SELECT EXISTS (SELECT 1 FROM backfill_keys WHERE queue_id = %(queue_id)s) AS any;
