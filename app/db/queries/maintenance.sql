-- name: maintenance_plan_for_values
-- Plan every statement of this transaction for its values. The pooled sessions keep one
-- generic plan per statement (app.db.engine), right for the hot statements, which go by an
-- index whatever the values. The retention queries are not: planned without the cutoff,
-- `sent_at < cutoff` looks like a third of the table, and their generic plans walked a whole
-- index of the queue with a heap fetch per entry (10M queued FIFO messages: 19 s a round,
-- every round, with nothing to expire). Planned for the values, the BRIN index on sent_at
-- finds the old pages, if any.
SET LOCAL plan_cache_mode = force_custom_plan;

-- name: maintenance_count_alone
-- Count without a parallel scan, for the rest of this transaction: the metrics loop's counts
-- (queue_stats) read every message row of a queue, and a parallel scan spends more CPU in all
-- (10M messages: 1.9 s on three processes against 3.3-3.6 s on one), taken from the hot path.
-- On one process, the loop's spacing of its rounds (app/service/metrics_loop.py) bounds its
-- share of one PostgreSQL core.
SET LOCAL max_parallel_workers_per_gather = 0;

-- name: maintenance_still_lead
-- Keep the leader's session busy: leadership lives with it (maintenance_try_lead's lock).
SELECT 1;

-- name: maintenance_try_lead
-- Become the maintenance leader if no other process is (session advisory lock).
SELECT pg_try_advisory_lock(%(key)s) AS leader;

-- name: queue_retention_all
-- Every queue with its retention period (the maintenance loop walks them).
SELECT id, name, fifo, retention_seconds FROM queues ORDER BY id;

-- name: dedup_prune
-- Forget up to `limit` deduplication ids whose window has ended.
DELETE FROM message_dedup d
USING (
    SELECT queue_id, scope_key, dedup_id FROM message_dedup
    WHERE expires_at <= coalesce(%(now)s::timestamptz, now())
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) old
WHERE d.queue_id = old.queue_id AND d.scope_key = old.scope_key AND d.dedup_id = old.dedup_id;

-- name: group_prune
-- Drop up to `limit` empty, unleased group rows (a later send simply creates the row again).
DELETE FROM message_groups g
USING (
    SELECT queue_id, group_id FROM message_groups
    WHERE available_at IS NULL AND lease_id IS NULL
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) e
WHERE g.queue_id = e.queue_id AND g.group_id = e.group_id
  AND g.available_at IS NULL AND g.lease_id IS NULL;

-- name: attempt_prune
-- Forget receive attempts whose window has ended.
DELETE FROM receive_attempts WHERE expires_at <= coalesce(%(now)s::timestamptz, now());

-- name: consumer_prune
-- Forget up to `limit` consumer rows whose lease is over (acked, received again, timed out).
DELETE FROM message_consumers c
USING (
    SELECT s.id, s.lease_id FROM message_consumers s
    WHERE NOT EXISTS (
        SELECT 1 FROM messages m
        WHERE m.id = s.id AND m.lease_id = s.lease_id AND m.visible_at > coalesce(%(now)s::timestamptz, now())
    )
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) stale
WHERE c.id = stale.id AND c.lease_id = stale.lease_id;
