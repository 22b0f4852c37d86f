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
-- Ack messages under current receipts in one round trip (function pqs_finish, migration 0010,
-- as an ack: `p_release` true): FIFO groups locked first, messages into history as acked with
-- the caller's result, groups released. Returns the positions (1-based) of the receipts that
-- acked a message (one call may name a message under a stale lease and its current one: only
-- the latter acks it) and whether long-polls should be woken.
SELECT entry, woke FROM pqs_finish(
    %(queue_id)s, %(queue_name)s, 'acked', %(ids)s::bigint[], %(lease_ids)s::uuid[], %(results)s::jsonb[],
    %(now)s::timestamptz, true
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
