-- name: queue_insert
-- Create a queue unless the name is taken; returns no row when it already exists.
INSERT INTO queues (
    name, fifo, visibility_timeout, delay_seconds, retention_seconds, max_message_bytes,
    receive_wait_seconds, content_based_deduplication, deduplication_scope,
    dead_letter_queue_id, max_receive_count, dead_letter_for
)
VALUES (
    %(name)s, %(fifo)s, %(visibility_timeout)s, %(delay_seconds)s, %(retention_seconds)s,
    %(max_message_bytes)s, %(receive_wait_seconds)s, %(content_based_deduplication)s,
    %(deduplication_scope)s, %(dead_letter_queue_id)s, %(max_receive_count)s, %(dead_letter_for)s
)
ON CONFLICT (name) DO NOTHING
RETURNING id;

-- name: queue_get
-- One queue with the name of its dead-letter queue.
SELECT q.*, d.name AS dead_letter_queue_name
FROM queues q
LEFT JOIN queues d ON d.id = q.dead_letter_queue_id
WHERE q.name = %(name)s;

-- name: queue_get_for_send
-- The queue a send writes to. Two locks keep a concurrent delete from orphaning messages:
-- a shared advisory lock on the queue (a delete takes it exclusively; the lock manager
-- queues fairly, so a stream of sends cannot starve a waiting delete), then a key-share row
-- lock, which re-reads the row after the wait: a send behind a committed delete finds nothing.
SELECT q.*, NULL::text AS dead_letter_queue_name
FROM queues q
CROSS JOIN LATERAL (SELECT pg_advisory_xact_lock_shared(%(lock_class)s, q.id)) AS fence
WHERE q.name = %(name)s
FOR KEY SHARE OF q;

-- name: queue_lock_for_delete
-- Wait for the sends in progress on this queue and hold off new ones (see queue_get_for_send).
SELECT pg_advisory_xact_lock(%(lock_class)s, %(id)s);

-- name: queue_get_by_id
-- One queue by id (used to follow dead-letter and redrive links).
SELECT q.*, d.name AS dead_letter_queue_name
FROM queues q
LEFT JOIN queues d ON d.id = q.dead_letter_queue_id
WHERE q.id = %(id)s;

-- name: queue_list
-- A page of queues in name order, optionally only names starting with a prefix.
SELECT q.*, d.name AS dead_letter_queue_name
FROM queues q
LEFT JOIN queues d ON d.id = q.dead_letter_queue_id
WHERE starts_with(q.name, %(prefix)s)
  AND q.name > %(after)s
ORDER BY q.name
LIMIT %(limit)s;

-- name: queue_update
-- Change the mutable attributes of a queue; a NULL parameter keeps the current value.
-- The dead-letter link is replaced as a pair when set_dead_letter is true, and dead_letter_for
-- (where NULL means any queue) when set_dead_letter_for is.
UPDATE queues
SET visibility_timeout = coalesce(%(visibility_timeout)s, visibility_timeout),
    delay_seconds = coalesce(%(delay_seconds)s, delay_seconds),
    retention_seconds = coalesce(%(retention_seconds)s, retention_seconds),
    max_message_bytes = coalesce(%(max_message_bytes)s, max_message_bytes),
    receive_wait_seconds = coalesce(%(receive_wait_seconds)s, receive_wait_seconds),
    content_based_deduplication = coalesce(%(content_based_deduplication)s, content_based_deduplication),
    deduplication_scope = coalesce(%(deduplication_scope)s::dedup_scope, deduplication_scope),
    dead_letter_queue_id = CASE WHEN %(set_dead_letter)s THEN %(dead_letter_queue_id)s ELSE dead_letter_queue_id END,
    max_receive_count = CASE WHEN %(set_dead_letter)s THEN %(max_receive_count)s ELSE max_receive_count END,
    dead_letter_for = CASE WHEN %(set_dead_letter_for)s THEN %(dead_letter_for)s::text[] ELSE dead_letter_for END,
    updated_at = now()
WHERE id = %(id)s;

-- name: queue_delete
-- Delete the queue row. Runs first in the delete transaction: it waits for senders holding
-- the key lock, and fails on the foreign key when another queue uses this one as its DLQ.
DELETE FROM queues WHERE id = %(id)s;

-- name: queue_dedup_clear
-- Forget the deduplication ids of a deleted queue.
DELETE FROM message_dedup WHERE queue_id = %(id)s;

-- name: queue_groups_clear
-- Drop the group rows of a deleted queue (its messages are already gone).
DELETE FROM message_groups WHERE queue_id = %(id)s;

-- name: queue_stats
-- Message counts of one queue. `visible` counts what a receive could take now (including
-- messages whose visibility timeout ran out), `in_flight` what receivers hold, `delayed`
-- ready messages not yet due. The always-true `group_id` OR reads the queue's rows through the
-- two partial indexes by queue (standard and FIFO; nothing indexes queue_id alone): without it
-- this was a scan of the whole table (100 messages among 2.8M: 77.5k buffers, 0.4 s).
SELECT
    count(*) FILTER (WHERE visible_at <= coalesce(%(now)s::timestamptz, now())) AS visible,
    count(*) FILTER (WHERE state = 'in_flight' AND visible_at > coalesce(%(now)s::timestamptz, now())) AS in_flight,
    count(*) FILTER (WHERE state = 'ready' AND visible_at > coalesce(%(now)s::timestamptz, now())) AS delayed,
    extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - min(sent_at))::float8 AS oldest_age_seconds
FROM messages
WHERE queue_id = %(queue_id)s AND (group_id IS NULL OR group_id IS NOT NULL);

-- name: queue_dead_letter_sources
-- The queues that use this queue as their dead-letter queue.
SELECT id, name FROM queues WHERE dead_letter_queue_id = %(id)s ORDER BY name;

-- name: queue_attempts_clear
-- Forget the receive attempts of a deleted queue.
DELETE FROM receive_attempts WHERE queue_id = %(id)s;

-- name: queue_dead_letter_sources_page
-- A page of the queues that use this queue as their dead-letter queue, in name order
-- (SQS's ListDeadLetterSourceQueues).
SELECT id, name FROM queues
WHERE dead_letter_queue_id = %(id)s AND name > %(after)s
ORDER BY name
LIMIT %(limit)s;

-- name: queue_lock_for_tags
-- Serialize the tag changes of one queue, so two concurrent TagQueues cannot together pass the
-- tag limit each checks alone. NO KEY UPDATE: sends' KEY SHARE locks do not wait for it.
SELECT id FROM queues WHERE id = %(id)s FOR NO KEY UPDATE;

-- name: queue_tags_set
-- Add tags or replace the values of existing keys (SQS: a key tagged again takes the new value).
INSERT INTO queue_tags (queue_id, key, value)
SELECT %(id)s, t.key, t.value
FROM unnest(%(keys)s::text[], %(values)s::text[]) AS t(key, value)
ON CONFLICT (queue_id, key) DO UPDATE SET value = excluded.value;

-- name: queue_tags_remove
-- Remove these keys; keys the queue does not have are no error (as SQS's UntagQueue).
DELETE FROM queue_tags WHERE queue_id = %(id)s AND key = ANY(%(keys)s::text[]);

-- name: queue_tags_list
-- A queue's tags, in key order.
SELECT key, value FROM queue_tags WHERE queue_id = %(id)s ORDER BY key;
