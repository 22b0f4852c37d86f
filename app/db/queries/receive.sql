-- name: message_receive_standard
-- Take up to `limit` due messages of a standard queue, earliest due first, skipping rows
-- other receivers hold. Each gets a new lease (its receipt) and a visibility timeout; a due
-- in-flight message is one whose timeout ran out, and is received again. Messages already
-- received max_receive_count times come back with dead = true, untouched but locked, for the
-- caller to move to the dead-letter queue.
WITH due AS (
    SELECT id, receive_count
    FROM messages
    WHERE queue_id = %(queue_id)s
      AND group_id IS NULL
      AND visible_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY visible_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
delivered AS (
    UPDATE messages m
    SET state = 'in_flight',
        lease_id = gen_random_uuid(),
        receive_count = m.receive_count + 1,
        visible_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(visibility_timeout)s),
        first_received_at = coalesce(m.first_received_at, coalesce(%(now)s::timestamptz, now())),
        last_received_at = coalesce(%(now)s::timestamptz, now())
    FROM due
    WHERE m.id = due.id
      AND (%(max_receive_count)s::int IS NULL OR due.receive_count < %(max_receive_count)s::int)
    RETURNING m.id, m.message_id, m.lease_id, m.body, m.group_id, m.dedup_id, m.receive_count,
              m.sent_at, m.first_received_at, m.attributes
)
SELECT false AS dead, d.* FROM delivered d
UNION ALL
SELECT true, due.id, NULL, NULL, NULL, NULL, NULL, due.receive_count, NULL, NULL, NULL
FROM due
WHERE %(max_receive_count)s::int IS NOT NULL AND due.receive_count >= %(max_receive_count)s::int;

-- name: group_pick
-- Lock up to `limit` groups that can be served now, longest-waiting first. This is the
-- round robin: a group that was just served re-enters behind every group already waiting.
-- SKIP LOCKED: two receivers never wait for, or share, a group. Index range scan on
-- message_groups_available_idx; no scan of the message table.
SELECT group_id, lease_id
FROM message_groups
WHERE queue_id = %(queue_id)s
  AND available_at <= coalesce(%(now)s::timestamptz, now())
ORDER BY available_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: lease_expire
-- Picked groups whose lease ran out: their messages go back to ready (receive count kept)
-- so that the group can be leased again, head first.
UPDATE messages m
SET state = 'ready', lease_id = NULL
FROM unnest(%(group_ids)s::text[], %(lease_ids)s::uuid[]) AS l(group_id, lease_id)
WHERE m.queue_id = %(queue_id)s
  AND m.group_id = l.group_id
  AND m.lease_id = l.lease_id;

-- name: group_heads
-- The messages this receive takes: for each picked group in pick order, its first messages
-- while they are due (a delayed message stops its group), at most `limit` in all. Each group
-- is read through messages_group_order_idx, `limit` rows at most.
SELECT c.id, c.group_id, c.receive_count
FROM unnest(%(group_ids)s::text[]) WITH ORDINALITY AS p(group_id, ord)
CROSS JOIN LATERAL (
    SELECT h.id, p.group_id, h.receive_count,
           bool_and(h.visible_at <= coalesce(%(now)s::timestamptz, now())) OVER (ORDER BY h.id) AS due_prefix
    FROM (
        SELECT id, receive_count, visible_at
        FROM messages
        WHERE queue_id = %(queue_id)s AND group_id = p.group_id
        ORDER BY id
        LIMIT %(limit)s
    ) h
) c
WHERE c.due_prefix
ORDER BY p.ord, c.id
LIMIT %(limit)s;

-- name: message_deliver_fifo
-- Give each group that yields messages a new lease, expiring with the visibility timeout,
-- and put its taken messages in flight under that lease (the group lease foreign key checks
-- both at the end of the statement).
WITH leased AS (
    UPDATE message_groups g
    SET lease_id = gen_random_uuid(),
        available_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(visibility_timeout)s)
    FROM unnest(%(group_ids)s::text[]) AS t(group_id)
    WHERE g.queue_id = %(queue_id)s AND g.group_id = t.group_id
    RETURNING g.group_id, g.lease_id
)
UPDATE messages m
SET state = 'in_flight',
    lease_id = leased.lease_id,
    receive_count = m.receive_count + 1,
    visible_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(visibility_timeout)s),
    first_received_at = coalesce(m.first_received_at, coalesce(%(now)s::timestamptz, now())),
    last_received_at = coalesce(%(now)s::timestamptz, now())
FROM leased
WHERE m.queue_id = %(queue_id)s
  AND m.group_id = leased.group_id
  AND m.id = ANY(%(ids)s::bigint[])
RETURNING false AS dead, m.id, m.message_id, m.lease_id, m.body, m.group_id, m.dedup_id,
          m.receive_count, m.sent_at, m.first_received_at, m.attributes;

-- name: next_due_standard
-- Seconds until the next message of a standard queue becomes due (the first entry of its
-- due index); NULL when the queue is empty. Wall clock: the caller sleeps on it.
SELECT extract(epoch FROM min(visible_at) - clock_timestamp())::float8 AS seconds
FROM messages WHERE queue_id = %(queue_id)s AND group_id IS NULL;

-- name: next_due_fifo
-- Seconds until the next group of a FIFO queue can be served (head due or lease expired).
SELECT extract(epoch FROM min(available_at) - clock_timestamp())::float8 AS seconds
FROM message_groups WHERE queue_id = %(queue_id)s AND available_at IS NOT NULL;

-- name: attempt_get
-- A receive attempt still inside its window: the receipts it handed out.
SELECT sequence_numbers, lease_ids
FROM receive_attempts
WHERE queue_id = %(queue_id)s AND attempt_id = %(attempt_id)s
  AND expires_at > coalesce(%(now)s::timestamptz, now());

-- name: attempt_messages
-- The messages of a repeated receive attempt that are still in flight under the receipts
-- that attempt handed out (same handles again, as SQS does).
SELECT false AS dead, m.id, m.message_id, m.lease_id, m.body, m.group_id, m.dedup_id,
       m.receive_count, m.sent_at, m.first_received_at, m.attributes
FROM messages m
JOIN unnest(%(ids)s::bigint[], %(lease_ids)s::uuid[]) AS r(id, lease_id)
  ON m.id = r.id AND m.lease_id = r.lease_id
WHERE m.queue_id = %(queue_id)s AND m.visible_at > coalesce(%(now)s::timestamptz, now())
ORDER BY m.id;

-- name: attempt_record
-- Remember what a receive attempt handed out, for retries of the same attempt id.
INSERT INTO receive_attempts (queue_id, attempt_id, sequence_numbers, lease_ids, expires_at)
VALUES (%(queue_id)s, %(attempt_id)s, %(ids)s::bigint[], %(lease_ids)s::uuid[],
        coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(window)s))
ON CONFLICT (queue_id, attempt_id) DO UPDATE
SET sequence_numbers = excluded.sequence_numbers, lease_ids = excluded.lease_ids,
    expires_at = excluded.expires_at;
