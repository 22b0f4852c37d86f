-- name: message_dead_letter
-- Copy messages the caller holds into the dead-letter queue as new ready messages (new sequence
-- numbers in their old order) that keep message id, body, group, dedup id, attributes (typed
-- ones too), sender, trace header and send time, and remember their source for redrive (and
-- for SQS's DeadLetterQueueSourceArn). message_finish then takes them out of the
-- source into history, as dead_lettered (they are held: nothing else moves them between).
INSERT INTO messages (
    id, queue_id, message_id, group_id, dedup_id, body, attributes, sent_at, visible_at,
    source_queue_id, last_error, attribute_types, sender_id, trace_header
)
SELECT nextval('message_seq'), %(dead_letter_queue_id)s, m.message_id, m.group_id, m.dedup_id,
       m.body, m.attributes, m.sent_at, coalesce(%(now)s::timestamptz, now()), %(queue_id)s,
       m.last_error, m.attribute_types, m.sender_id, m.trace_header
FROM messages m
WHERE m.queue_id = %(queue_id)s AND m.id = ANY(%(ids)s::bigint[])
ORDER BY m.id
RETURNING id, group_id;

-- name: message_finish
-- Take messages the caller holds out of their queue into history with this outcome (function
-- pqs_finish, migration 0010, where the history row is written); each one's sequence number
-- and group.
SELECT f.id, f.group_id
FROM pqs_finish(
    %(queue_id)s::int, %(queue_name)s::text, %(outcome)s::history_outcome, %(ids)s::bigint[], '{}', '{}',
    %(now)s::timestamptz, false
) AS f;

-- name: redrive_pick_standard
-- Visible messages of a standard dead-letter queue (due, or their visibility timeout ran
-- out), earliest due first as a receive takes them, locked for the move: the queue's range of
-- messages_standard_due_idx, read in order up to `limit`. In id order it walked the primary
-- key of the whole table with a filter (a 100-message queue in a 2.8M-message table: 105k
-- buffers, 0.9 s). No `id` tie-break: it would sort every message sharing a due time before
-- the first came out (a DLQ filled by one statement shares one); message_move numbers each
-- batch in its old order anyway. Only messages from `source_queue_id` when asked (a redrive
-- of a subset; NULL: any).
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
  AND coalesce(source_queue_id = %(source_queue_id)s::int, true)  -- only from this source (NULL: any)
  AND coalesce(id <= %(before_id)s::bigint, true)  -- a move task's last message (NULL: no limit)
ORDER BY visible_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: redrive_pick_groups
-- Groups of a FIFO dead-letter queue that could be served now (nothing in flight, or the
-- lease ran out) and have something to send back, locked for the move: only `group_id` and
-- only messages from `source_queue_id` when asked (a redrive of a subset; NULL: any). (The
-- coalesce: see redrive_pick_standard.)
SELECT g.group_id
FROM message_groups g
WHERE g.queue_id = %(queue_id)s AND g.available_at <= coalesce(%(now)s::timestamptz, now())
  AND coalesce(g.group_id = %(group_id)s::text, true)  -- only this group (NULL: any)
  AND EXISTS (
      SELECT 1 FROM messages m
      WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id
        AND coalesce(m.source_queue_id IS NOT NULL, false)
        AND coalesce(m.source_queue_id = %(source_queue_id)s::int, true)  -- only from this source (NULL: any)
        AND coalesce(m.id <= %(before_id)s::bigint, true)  -- a move task's last message (NULL: no limit)
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
      AND coalesce(m.source_queue_id = %(source_queue_id)s::int, true)  -- only from this source (NULL: any)
      AND coalesce(m.id <= %(before_id)s::bigint, true)  -- a move task's last message (NULL: no limit)
    ORDER BY m.id
    LIMIT %(limit)s
) AS m
ORDER BY g.ord, m.id
LIMIT %(limit)s;

-- name: redrive_count_standard
-- How many messages a redrive of a standard dead-letter queue would move now (from one source
-- queue, or any), per source queue: what redrive_pick_standard would pick, batch after batch,
-- counted without locking. The confirmation of a redrive asks it first (its `dry_run`), and
-- checks the caller may send into each source, as the redrive does. The queue's range of
-- messages_standard_due_idx, as the pick reads it.
SELECT q.name AS source_queue, n.total
FROM (
    SELECT source_queue_id, count(*) AS total
    FROM messages
    WHERE queue_id = %(queue_id)s AND group_id IS NULL
      AND visible_at <= coalesce(%(now)s::timestamptz, now())
      AND coalesce(source_queue_id IS NOT NULL, false)
      AND coalesce(source_queue_id = %(source_queue_id)s::int, true)
    GROUP BY source_queue_id
) AS n
JOIN queues q ON q.id = n.source_queue_id
ORDER BY q.id;

-- name: redrive_count_fifo
-- How many messages a redrive of a FIFO dead-letter queue would move now (of one group, or
-- any; from one source queue, or any), per source queue: the messages with a source in the
-- groups redrive_pick_groups would lock, counted without locking. The groups by key (one group:
-- one row), then each group's range of messages_group_order_idx.
SELECT q.name AS source_queue, sum(n.total)::bigint AS total
FROM message_groups g
CROSS JOIN LATERAL (
    SELECT m.source_queue_id, count(*) AS total
    FROM messages m
    WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id
      AND coalesce(m.source_queue_id IS NOT NULL, false)
      AND coalesce(m.source_queue_id = %(source_queue_id)s::int, true)
    GROUP BY m.source_queue_id
) AS n
JOIN queues q ON q.id = n.source_queue_id
WHERE g.queue_id = %(queue_id)s AND g.available_at <= coalesce(%(now)s::timestamptz, now())
  AND coalesce(g.group_id = %(group_id)s::text, true)
GROUP BY q.id, q.name
ORDER BY q.id;

-- name: message_move
-- Move messages the caller holds into another queue as new ready messages (new sequence
-- numbers in their old order, receive count reset): redrive from a dead-letter queue.
WITH moved AS (
    DELETE FROM messages m
    WHERE m.queue_id = %(queue_id)s AND m.id = ANY(%(ids)s::bigint[])
    RETURNING m.*
)
INSERT INTO messages (
    id, queue_id, message_id, group_id, dedup_id, body, attributes, sent_at, visible_at,
    attribute_types, sender_id, trace_header
)
SELECT nextval('message_seq'), %(target_queue_id)s, mv.message_id, mv.group_id, mv.dedup_id,
       mv.body, mv.attributes, mv.sent_at, coalesce(%(now)s::timestamptz, now()),
       mv.attribute_types, mv.sender_id, mv.trace_header
FROM moved mv
ORDER BY mv.id
RETURNING id, group_id;

-- name: group_lock_all
-- Lock every group of a queue, in group order (purge and delete).
SELECT group_id FROM message_groups WHERE queue_id = %(queue_id)s ORDER BY group_id FOR UPDATE;

-- name: message_purge
-- Remove every message of a queue, recording each in history as purged (pqs_finish, migration
-- 0010). Both indexes of messages by queue are partial (standard: group_id IS NULL, FIFO: IS
-- NOT NULL) and nothing indexes queue_id alone, so `queue_id = $1` by itself is a scan of the
-- whole table (100 messages among 2.8M: 0.4 s). The always-true OR lets the planner read both
-- partial indexes (a BitmapOr), whichever kind the queue is.
SELECT count(*) AS purged
FROM pqs_finish(
    %(queue_id)s::int, %(queue_name)s::text, 'purged',
    ARRAY(SELECT id FROM messages WHERE queue_id = %(queue_id)s AND (group_id IS NULL OR group_id IS NOT NULL)),
    '{}', '{}', %(now)s::timestamptz, false
);

-- name: group_reset_all
-- After a purge: every group of the queue is empty and unleased.
UPDATE message_groups
SET lease_id = NULL, available_at = NULL
WHERE queue_id = %(queue_id)s AND (lease_id IS NOT NULL OR available_at IS NOT NULL);

-- name: expired_groups
-- FIFO groups holding messages past the queue's retention (the BRIN index on sent_at finds
-- the old pages).
SELECT DISTINCT group_id
FROM messages
WHERE queue_id = %(queue_id)s AND group_id IS NOT NULL
  AND sent_at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(retention_seconds)s)
LIMIT %(limit)s;

-- name: group_lock
-- Lock these groups of a queue, in group order.
SELECT group_id FROM message_groups
WHERE queue_id = %(queue_id)s AND group_id = ANY(%(group_ids)s::text[])
ORDER BY group_id
FOR UPDATE;

-- name: message_expire
-- Remove up to `limit` messages older than the queue's retention, recording each in history as
-- expired (pqs_finish, migration 0010). FIFO messages only from the groups the caller locked;
-- standard messages are skipped while a receiver holds them.
SELECT f.id, f.group_id
FROM pqs_finish(
    %(queue_id)s::int, %(queue_name)s::text, 'expired',
    ARRAY(
        SELECT id FROM messages
        WHERE queue_id = %(queue_id)s
          AND sent_at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(retention_seconds)s)
          AND (group_id IS NULL OR group_id = ANY(%(group_ids)s::text[]))
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ),
    '{}', '{}', %(now)s::timestamptz, false
) AS f;

-- name: move_task_backlog
-- What a move task of this dead-letter queue starts from: how many of its messages came from a
-- source queue (the ones a redrive picks, in flight or not), the last of them (the task's
-- high-water mark, 0 when there is none: the task then moves nothing), and their source
-- queues (whose send right the caller needs). One read of the queue, through both partial
-- indexes as message_purge reads it.
SELECT count(*) AS to_move, coalesce(max(id), 0) AS before_id,
       coalesce(array_agg(DISTINCT source_queue_id), '{}') AS source_ids
FROM messages
WHERE queue_id = %(queue_id)s AND (group_id IS NULL OR group_id IS NOT NULL)
  AND coalesce(source_queue_id IS NOT NULL, false);

-- name: move_task_insert
-- A new running task. The partial unique index message_move_tasks_running_idx refuses a
-- second running task of the same dead-letter queue.
INSERT INTO message_move_tasks (
    id, source_queue_id, destination_queue_id, destination_name, max_per_second, status, to_move,
    started_at, before_id
)
VALUES (
    %(id)s, %(source_queue_id)s, %(destination_queue_id)s, %(destination_name)s, %(max_per_second)s,
    'RUNNING', %(to_move)s, coalesce(%(now)s::timestamptz, now()), %(before_id)s
)
RETURNING id, source_queue_id, destination_queue_id, destination_name, max_per_second, status, to_move,
          moved, failure_reason, started_at, before_id;

-- name: move_task_trim
-- Keep a dead-letter queue's newest `keep` tasks that have ended (SQS lists the last 10); a
-- running one always stays.
DELETE FROM message_move_tasks
WHERE source_queue_id = %(source_queue_id)s AND status <> 'RUNNING'
  AND id NOT IN (
      SELECT id FROM message_move_tasks
      WHERE source_queue_id = %(source_queue_id)s
      ORDER BY started_at DESC, id
      LIMIT %(keep)s
  );

-- name: move_task_get
-- One task of a dead-letter queue, locked against the runner (a cancel waits for the batch in
-- progress, then sees what it left).
SELECT id, source_queue_id, destination_queue_id, destination_name, max_per_second, status, to_move,
       moved, failure_reason, started_at, before_id
FROM message_move_tasks
WHERE id = %(id)s AND source_queue_id = %(source_queue_id)s
FOR UPDATE;

-- name: move_task_list
-- A dead-letter queue's tasks, newest first.
SELECT id, source_queue_id, destination_queue_id, destination_name, max_per_second, status, to_move,
       moved, failure_reason, started_at, before_id
FROM message_move_tasks
WHERE source_queue_id = %(source_queue_id)s
ORDER BY started_at DESC, id
LIMIT %(limit)s;

-- name: move_task_running
-- The running tasks, oldest first: the runner advances each in turn.
SELECT id FROM message_move_tasks WHERE status = 'RUNNING' ORDER BY started_at, id;

-- name: move_task_lock
-- A running task, locked for one batch, with how many messages its rate allows now: the rate
-- times the seconds since it started, less what it moved (NULL: no rate, no limit). Counted
-- from the start, not per round, so a round late or early does not change the rate.
SELECT id, source_queue_id, destination_queue_id, destination_name, before_id,
       CASE WHEN max_per_second IS NOT NULL THEN
           floor(max_per_second * extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - started_at))::bigint - moved
       END AS allowance
FROM message_move_tasks
WHERE id = %(id)s AND status = 'RUNNING'
FOR UPDATE;

-- name: move_task_progress
-- Count messages a batch of the task moved.
UPDATE message_move_tasks SET moved = moved + %(moved)s WHERE id = %(id)s;

-- name: move_task_end
-- A running task ends: COMPLETED, FAILED (with its reason) or CANCELLED; what it moved.
UPDATE message_move_tasks SET status = %(status)s, failure_reason = %(failure_reason)s
WHERE id = %(id)s AND status = 'RUNNING'
RETURNING moved;
