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
              m.sent_at, m.first_received_at, m.attributes, m.attribute_types, m.sender_id,
              m.trace_header, m.source_queue_id
)
SELECT false AS dead, d.* FROM delivered d
UNION ALL
SELECT true, due.id, NULL, NULL, NULL, NULL, NULL, due.receive_count, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM due
WHERE %(max_receive_count)s::int IS NOT NULL AND due.receive_count >= %(max_receive_count)s::int;

-- name: fifo_receive
-- A FIFO receive in one round trip (function pqs_fifo_receive, migration 0002): lock servable
-- groups one at a time, longest-waiting first, while the receive has room; take each group's
-- due prefix; lease the group and put the prefix in flight. Rows with dead = true are past
-- max_receive_count, for the caller to dead-letter. `ord` is the group's pick order.
SELECT * FROM pqs_fifo_receive(
    %(queue_id)s, %(limit)s, %(visibility_timeout)s, %(now)s::timestamptz, %(max_receive_count)s
);

-- name: fifo_receive_many
-- Several FIFO receives of one queue in one statement, so one commit: pqs_fifo_receive runs once
-- per receiver, in receiver order (the lateral call is made for each row of the unnest, in
-- turn). It is volatile, so each call's queries see what the earlier calls of this statement
-- leased: a group taken by one receiver is not due for the next, and no group goes to two.
-- No dead-letter queue here (the caller sends only those receives): max_receive_count NULL.
SELECT s.slot::int AS slot, r.*
FROM unnest(%(limits)s::int[]) WITH ORDINALITY AS s(lim, slot)
CROSS JOIN LATERAL pqs_fifo_receive(
    %(queue_id)s, s.lim, %(visibility_timeout)s, %(now)s::timestamptz, NULL
) AS r;

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

-- name: attempt_repeat
-- A retry of a receive attempt: the messages still in flight under the receipts that attempt
-- handed out (same handles again, as SQS does), hidden again for the retry's visibility timeout
-- from now (SQS: a retry within the attempt's window resets the visibility timeout). Neither
-- the receive count nor the received times change: it is the same receive, answered again. On
-- a FIFO queue the caller has locked the messages' groups first (group_lock_for_messages) and
-- extends their leases after (group_extend). UPDATE cannot order what it returns: the CTE does.
WITH repeated AS (
    UPDATE messages m
    SET visible_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(visibility_timeout)s)
    FROM unnest(%(ids)s::bigint[], %(lease_ids)s::uuid[]) AS r(id, lease_id)
    WHERE m.id = r.id AND m.lease_id = r.lease_id AND m.queue_id = %(queue_id)s
      AND m.visible_at > coalesce(%(now)s::timestamptz, now())
    RETURNING false AS dead, m.id, m.message_id, m.lease_id, m.body, m.group_id, m.dedup_id,
              m.receive_count, m.sent_at, m.first_received_at, m.attributes, m.attribute_types,
              m.sender_id, m.trace_header, m.source_queue_id
)
SELECT * FROM repeated ORDER BY id;

-- name: attempt_record
-- Remember what a receive attempt handed out, for retries of the same attempt id.
INSERT INTO receive_attempts (queue_id, attempt_id, sequence_numbers, lease_ids, expires_at)
VALUES (%(queue_id)s, %(attempt_id)s, %(ids)s::bigint[], %(lease_ids)s::uuid[],
        coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(window)s))
ON CONFLICT (queue_id, attempt_id) DO UPDATE
SET sequence_numbers = excluded.sequence_numbers, lease_ids = excluded.lease_ids,
    expires_at = excluded.expires_at;

-- name: consumer_record
-- Remember which consumer id received these messages, under the lease of this receive.
INSERT INTO message_consumers (id, queue_id, consumer_id, lease_id)
SELECT r.id, %(queue_id)s, %(consumer_id)s, r.lease_id
FROM unnest(%(ids)s::bigint[], %(lease_ids)s::uuid[]) AS r(id, lease_id)
ON CONFLICT (id) DO UPDATE
SET queue_id = excluded.queue_id, consumer_id = excluded.consumer_id, lease_id = excluded.lease_id;

-- name: consumer_held
-- The in-flight messages a consumer holds now: its lease is still the message's lease.
SELECT m.id, m.lease_id
FROM message_consumers c
JOIN messages m ON m.id = c.id AND m.lease_id = c.lease_id
WHERE c.queue_id = %(queue_id)s AND c.consumer_id = %(consumer_id)s AND m.queue_id = %(queue_id)s
ORDER BY m.id;
