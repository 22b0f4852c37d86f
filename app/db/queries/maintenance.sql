-- name: maintenance_try_lead
-- Become the maintenance leader if no other process is (session advisory lock).
SELECT pg_try_advisory_lock(%(key)s) AS leader;

-- name: queue_retention_all
-- Every queue with its retention period (the maintenance loop walks them).
SELECT id, name, fifo, retention_seconds FROM queues ORDER BY id;

-- name: expired_groups
-- FIFO groups holding messages past the queue's retention (the BRIN index on sent_at finds
-- the old pages).
SELECT DISTINCT group_id
FROM messages
WHERE queue_id = %(queue_id)s AND group_id IS NOT NULL
  AND sent_at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(retention_seconds)s)
LIMIT %(limit)s;

-- name: message_expire
-- Remove up to `limit` messages older than the queue's retention, recording each in history as
-- expired. FIFO messages only from the groups the caller locked; standard messages are
-- skipped while a receiver holds them.
WITH old AS (
    SELECT id FROM messages
    WHERE queue_id = %(queue_id)s
      AND sent_at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(retention_seconds)s)
      AND (group_id IS NULL OR group_id = ANY(%(group_ids)s::text[]))
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM messages m USING old WHERE m.id = old.id RETURNING m.*
),
recorded AS (
    INSERT INTO message_history (
        queue_id, queue_name, message_id, sequence_number, group_id, dedup_id, sent_at,
        first_received_at, last_received_at, finished_at, receive_count, outcome, result, error
    )
    SELECT g.queue_id, %(queue_name)s, g.message_id, g.id, g.group_id, g.dedup_id, g.sent_at,
           g.first_received_at, g.last_received_at, coalesce(%(now)s::timestamptz, now()),
           g.receive_count, 'expired', NULL, g.last_error
    FROM gone g
)
SELECT id, group_id FROM gone;

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

-- name: group_lock
-- Lock these groups of a queue, in group order.
SELECT group_id FROM message_groups
WHERE queue_id = %(queue_id)s AND group_id = ANY(%(group_ids)s::text[])
ORDER BY group_id
FOR UPDATE;

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
