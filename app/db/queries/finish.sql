-- name: group_lock_for_messages
-- Lock, in group order, the groups of these messages before touching the messages. Every
-- writer of a FIFO queue takes a group's row before its messages, so writers never deadlock,
-- and a receiver (which takes groups with SKIP LOCKED) never sees a group half-changed.
SELECT g.group_id
FROM message_groups g
WHERE g.queue_id = %(queue_id)s
  AND g.group_id IN (
      SELECT m.group_id FROM messages m
      WHERE m.queue_id = %(queue_id)s AND m.id = ANY(%(ids)s::bigint[]) AND m.group_id IS NOT NULL
  )
ORDER BY g.group_id
FOR UPDATE OF g;

-- name: message_ack
-- Ack messages under current receipts in one round trip (function pqs_ack, migrations 0002 and
-- 0009): FIFO groups locked first, messages into history as acked with the caller's result,
-- groups released. Returns the positions (1-based) of the receipts that acked a message (one call
-- may name a message under a stale lease and its current one: only the latter acks it) and
-- whether long-polls should be woken.
SELECT entry, woke FROM pqs_ack(
    %(queue_id)s, %(queue_name)s, %(ids)s::bigint[], %(lease_ids)s::uuid[], %(results)s::jsonb[],
    %(now)s::timestamptz
);

-- name: message_nack
-- Return in-flight messages to ready, due after their delay; the receive count stays and the
-- error is kept for the history row the message will get when it finishes. Answers the
-- receipts that matched, lease included (a batch may name a message under a stale receipt too).
UPDATE messages m
SET state = 'ready',
    lease_id = NULL,
    visible_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => r.delay),
    last_error = coalesce(r.error, m.last_error)
FROM unnest(%(ids)s::bigint[], %(lease_ids)s::uuid[], %(delays)s::int[], %(errors)s::jsonb[])
    AS r(id, lease_id, delay, error)
WHERE m.id = r.id AND m.lease_id = r.lease_id AND m.queue_id = %(queue_id)s
RETURNING m.id, r.lease_id, m.group_id;

-- name: message_give_back
-- Undo a receive whose answer never reached its client (it left between the lease and the
-- answer): the messages under the receipts that receive handed out are ready and due again at
-- once. The consumer never saw them, so the receive does not count: the receive count goes
-- back down (it is what max_receive_count is checked against), a message received for the
-- first time loses its received times again, and no error is recorded (the move the state rule
-- allows since migration 0008). The earlier last_received_at of a message received before is
-- not kept; the next receive sets it. Answers the receipts that matched, as message_nack.
UPDATE messages m
SET state = 'ready',
    lease_id = NULL,
    visible_at = coalesce(%(now)s::timestamptz, now()),
    receive_count = m.receive_count - 1,
    first_received_at = CASE WHEN m.receive_count > 1 THEN m.first_received_at END,
    last_received_at = CASE WHEN m.receive_count > 1 THEN m.last_received_at END
FROM unnest(%(ids)s::bigint[], %(lease_ids)s::uuid[]) AS r(id, lease_id)
WHERE m.id = r.id AND m.lease_id = r.lease_id AND m.queue_id = %(queue_id)s
RETURNING m.id, r.lease_id, m.group_id;

-- name: message_visibility
-- Set the remaining visibility timeout of messages still in flight under these receipts.
-- Answers the receipts that matched, as message_nack.
UPDATE messages m
SET visible_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => r.timeout)
FROM unnest(%(ids)s::bigint[], %(lease_ids)s::uuid[], %(timeouts)s::int[]) AS r(id, lease_id, timeout)
WHERE m.id = r.id AND m.lease_id = r.lease_id AND m.queue_id = %(queue_id)s
  AND m.visible_at > coalesce(%(now)s::timestamptz, now())
RETURNING m.id, r.lease_id, m.group_id;

-- name: group_release
-- Release the leases of (locked) groups with nothing left in flight and set their next turn
-- (function pqs_group_release, migration 0002, where the rules are spelled out).
SELECT * FROM pqs_group_release(%(queue_id)s, %(group_ids)s::text[], %(served)s, %(now)s::timestamptz);

-- name: group_extend
-- After visibility changes in (locked) leased groups: the group waits for the last of its
-- in-flight messages, so its expiry is the latest visibility timeout under the lease. Driven by
-- the group list: each group is found by its key and its messages under the lease through
-- messages_group_lease_idx. A join of the queue's messages to its groups instead was planned,
-- generically, as a hash of every group row of the queue and a walk of every message the queue
-- has in flight (100k groups: 1,863 buffers and 42 ms for a change in 10 groups). A group with
-- nothing in flight under its lease is left as it is.
UPDATE message_groups g
SET available_at = (
    SELECT max(m.visible_at) FROM messages m
    WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id AND m.lease_id = g.lease_id
)
WHERE g.queue_id = %(queue_id)s AND g.group_id = ANY(%(group_ids)s::text[])
  AND EXISTS (
      SELECT 1 FROM messages m
      WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id AND m.lease_id = g.lease_id
  );

-- name: message_dead_letter
-- Move messages the caller holds to the dead-letter queue in one statement: out of the
-- source, into history as dead_lettered, and into the DLQ as new ready messages (new
-- sequence numbers in their old order) that keep message id, body, group, dedup id,
-- attributes and send time, and remember their source for redrive.
WITH moved AS (
    DELETE FROM messages m
    WHERE m.queue_id = %(queue_id)s AND m.id = ANY(%(ids)s::bigint[])
    RETURNING m.*
),
recorded AS (
    INSERT INTO message_history (
        queue_id, queue_name, message_id, sequence_number, group_id, dedup_id, sent_at,
        first_received_at, last_received_at, finished_at, receive_count, outcome, result, error
    )
    SELECT mv.queue_id, %(queue_name)s, mv.message_id, mv.id, mv.group_id, mv.dedup_id, mv.sent_at,
           mv.first_received_at, mv.last_received_at, coalesce(%(now)s::timestamptz, now()),
           mv.receive_count, 'dead_lettered', NULL, mv.last_error
    FROM moved mv
)
INSERT INTO messages (
    id, queue_id, message_id, group_id, dedup_id, body, attributes, sent_at, visible_at,
    source_queue_id, last_error
)
SELECT nextval('message_seq'), %(dead_letter_queue_id)s, mv.message_id, mv.group_id, mv.dedup_id,
       mv.body, mv.attributes, mv.sent_at, coalesce(%(now)s::timestamptz, now()), %(queue_id)s,
       mv.last_error
FROM moved mv
ORDER BY mv.id
RETURNING id, group_id;

-- name: redrive_pick_standard
-- Visible messages of a standard dead-letter queue (due, or their visibility timeout ran
-- out), earliest due first as a receive takes them, locked for the move: the queue's range of
-- messages_standard_due_idx, read in order up to `limit`. In id order it walked the primary
-- key of the whole table with a filter (a 100-message queue in a 2.8M-message table: 105k
-- buffers, 0.9 s). No `id` tie-break: it would sort every message sharing a due time before
-- the first came out (a DLQ filled by one statement shares one); message_move numbers each
-- batch in its old order anyway.
-- "Has a source" is coalesce(source_queue_id IS NOT NULL, false), which the planner gives a
-- fixed guess. `IS NOT NULL` it estimates from the column's statistics, and where they said
-- few messages had a source, a generic plan read the queue's whole range and sorted it on
-- every call (a 200k-message DLQ: 25k buffers, 0.24 s a batch of 500), or matched the
-- predicate of messages_source_queue_idx (a queue delete's foreign key) and read and sorted
-- the messages of every dead-letter queue (33k buffers, 0.27 s). Likewise in the picks below.
SELECT id, group_id, source_queue_id
FROM messages
WHERE queue_id = %(queue_id)s AND group_id IS NULL
  AND visible_at <= coalesce(%(now)s::timestamptz, now())
  AND coalesce(source_queue_id IS NOT NULL, false)
ORDER BY visible_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: redrive_pick_groups
-- Groups of a FIFO dead-letter queue that could be served now (nothing in flight, or the
-- lease ran out) and have something to send back, locked for the move. (The coalesce: see
-- redrive_pick_standard.)
SELECT g.group_id
FROM message_groups g
WHERE g.queue_id = %(queue_id)s AND g.available_at <= coalesce(%(now)s::timestamptz, now())
  AND EXISTS (
      SELECT 1 FROM messages m
      WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id
        AND coalesce(m.source_queue_id IS NOT NULL, false)
  )
ORDER BY g.group_id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: redrive_pick_fifo
-- The first messages of locked dead-letter groups that have a source to go back to, each
-- group's in order, at most `limit` in all: a batch is bounded by messages, not groups, so a
-- group of a million messages goes back over many transactions (its next batch starts where
-- this one ended, behind it in the source). Group by group, each from the head of its range of
-- messages_group_order_idx, so a batch reads about `limit` index entries however large its
-- groups are (one `= ANY` scan of the groups, ordered by id, would read every message of
-- them to find the first). (The coalesce: see redrive_pick_standard.)
SELECT m.id, m.group_id, m.source_queue_id
FROM unnest(%(group_ids)s::text[]) WITH ORDINALITY AS g(group_id, ord)
CROSS JOIN LATERAL (
    SELECT m.id, m.group_id, m.source_queue_id
    FROM messages m
    WHERE m.queue_id = %(queue_id)s AND m.group_id = g.group_id
      AND coalesce(m.source_queue_id IS NOT NULL, false)
    ORDER BY m.id
    LIMIT %(limit)s
) AS m
ORDER BY g.ord, m.id
LIMIT %(limit)s;

-- name: message_move
-- Move messages the caller holds into another queue as new ready messages (new sequence
-- numbers in their old order, receive count reset): redrive from a dead-letter queue.
WITH moved AS (
    DELETE FROM messages m
    WHERE m.queue_id = %(queue_id)s AND m.id = ANY(%(ids)s::bigint[])
    RETURNING m.*
)
INSERT INTO messages (id, queue_id, message_id, group_id, dedup_id, body, attributes, sent_at, visible_at)
SELECT nextval('message_seq'), %(target_queue_id)s, mv.message_id, mv.group_id, mv.dedup_id,
       mv.body, mv.attributes, mv.sent_at, coalesce(%(now)s::timestamptz, now())
FROM moved mv
ORDER BY mv.id
RETURNING id, group_id;

-- name: group_lock_all
-- Lock every group of a queue, in group order (purge and delete).
SELECT group_id FROM message_groups WHERE queue_id = %(queue_id)s ORDER BY group_id FOR UPDATE;

-- name: message_purge
-- Remove every message of a queue, recording each in history as purged. Both indexes of
-- messages by queue are partial (standard: group_id IS NULL, FIFO: IS NOT NULL) and nothing
-- indexes queue_id alone, so `queue_id = $1` by itself is a scan of the whole table (100
-- messages among 2.8M: 0.4 s). The always-true OR lets the planner read both partial indexes
-- (a BitmapOr), whichever kind the queue is.
WITH gone AS (
    DELETE FROM messages
    WHERE queue_id = %(queue_id)s AND (group_id IS NULL OR group_id IS NOT NULL)
    RETURNING *
),
recorded AS (
    INSERT INTO message_history (
        queue_id, queue_name, message_id, sequence_number, group_id, dedup_id, sent_at,
        first_received_at, last_received_at, finished_at, receive_count, outcome, result, error
    )
    SELECT g.queue_id, %(queue_name)s, g.message_id, g.id, g.group_id, g.dedup_id, g.sent_at,
           g.first_received_at, g.last_received_at, coalesce(%(now)s::timestamptz, now()),
           g.receive_count, 'purged', NULL, g.last_error
    FROM gone g
)
SELECT count(*) AS purged FROM gone;

-- name: group_reset_all
-- After a purge: every group of the queue is empty and unleased.
UPDATE message_groups
SET lease_id = NULL, available_at = NULL
WHERE queue_id = %(queue_id)s AND (lease_id IS NOT NULL OR available_at IS NOT NULL);
