-- name: queue_minutes_add
-- Add what one process counted since its last flush (app/service/throughput.py): a row per queue
-- and minute, upserted by adding, so that the counts of every process sum. Each flush names a
-- (queue, minute) once.
INSERT INTO queue_minutes AS q (queue_id, minute, sent, acked, dead_lettered)
SELECT * FROM unnest(
    %(queue_ids)s::int[], %(minutes)s::timestamptz[], %(sent)s::bigint[], %(acked)s::bigint[],
    %(dead_lettered)s::bigint[]
)
ON CONFLICT (queue_id, minute) DO UPDATE
SET sent = q.sent + excluded.sent,
    acked = q.acked + excluded.acked,
    dead_lettered = q.dead_lettered + excluded.dead_lettered;

-- name: queue_minutes_sample
-- The maintenance leader's count of one queue (queue_stats, made for /metrics anyway) as the
-- queue's depth in this minute; a later count in the same minute replaces it.
INSERT INTO queue_minutes AS q (queue_id, minute, visible, in_flight, delayed, oldest_age_seconds)
VALUES (
    %(queue_id)s, date_trunc('minute', coalesce(%(now)s::timestamptz, now())), %(visible)s, %(in_flight)s,
    %(delayed)s, %(oldest_age_seconds)s
)
ON CONFLICT (queue_id, minute) DO UPDATE
SET visible = excluded.visible,
    in_flight = excluded.in_flight,
    delayed = excluded.delayed,
    oldest_age_seconds = excluded.oldest_age_seconds;

-- name: queue_minutes_range
-- A queue's last `minutes` minutes, this one included, one row each, oldest first: zero counts
-- and no depth where nothing was recorded. Reads that queue's rows of the range by the primary
-- key (queue_id, minute), the range written out so that the index bounds it: at most one row
-- per minute asked for, whatever the queue did and however many queues there are.
WITH span AS (
    SELECT date_trunc('minute', coalesce(%(now)s::timestamptz, now())) AS last,
           date_trunc('minute', coalesce(%(now)s::timestamptz, now()))
               - (%(minutes)s::int - 1) * interval '1 minute' AS first
)
SELECT s.minute, coalesce(q.sent, 0) AS sent, coalesce(q.acked, 0) AS acked,
       coalesce(q.dead_lettered, 0) AS dead_lettered, q.visible, q.in_flight, q.delayed, q.oldest_age_seconds
FROM span
CROSS JOIN generate_series(span.first, span.last, interval '1 minute') AS s(minute)
LEFT JOIN queue_minutes q
    ON q.queue_id = %(queue_id)s AND q.minute = s.minute
   AND q.minute BETWEEN (SELECT first FROM span) AND (SELECT last FROM span)
ORDER BY s.minute;

-- name: queue_minutes_prune
-- Forget up to `limit` minutes older than a day (the dashboard asks for an hour, the API for a
-- day at most), oldest first by queue_minutes_minute_idx.
DELETE FROM queue_minutes q
USING (
    SELECT queue_id, minute FROM queue_minutes
    WHERE minute < coalesce(%(now)s::timestamptz, now()) - interval '24 hours'
    ORDER BY minute
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) old
WHERE q.queue_id = old.queue_id AND q.minute = old.minute;

-- name: queue_minutes_clear
-- Forget the minutes of a deleted queue.
DELETE FROM queue_minutes WHERE queue_id = %(id)s;

-- name: queue_census_clear
-- Forget the group census of a deleted queue.
DELETE FROM queue_group_census WHERE queue_id = %(id)s;

-- name: group_census_take
-- Count a FIFO queue's groups (the maintenance leader, after its count of the queue): how many
-- hold messages, the `limit` largest, and the `limit` with the oldest heads (the lowest first
-- sequence number: numbers grow with send order). One read of the queue's range of
-- messages_group_order_idx (queue_id, group_id, id) in order, index-only where the visibility
-- map allows: each group's count and head come out of its run of entries, no sort of messages.
-- It reads every message of the queue, as queue_stats does, which is why it runs there, in the
-- rounds the metrics loop spaces by their cost, and never on a request.
WITH per_group AS MATERIALIZED (
    SELECT group_id, count(*) AS messages, min(id) AS head
    FROM messages
    WHERE queue_id = %(queue_id)s AND group_id IS NOT NULL
    GROUP BY group_id
)
INSERT INTO queue_group_census AS c (queue_id, counted_at, group_count, largest, oldest)
SELECT %(queue_id)s, coalesce(%(now)s::timestamptz, now()), (SELECT count(*) FROM per_group),
       coalesce((
           SELECT jsonb_agg(jsonb_build_object('group_id', l.group_id, 'messages', l.messages)
                            ORDER BY l.messages DESC, l.group_id)
           FROM (SELECT * FROM per_group ORDER BY messages DESC, group_id LIMIT %(limit)s) l
       ), '[]'::jsonb),
       coalesce((
           SELECT jsonb_agg(jsonb_build_object('group_id', o.group_id, 'messages', o.messages) ORDER BY o.head)
           FROM (SELECT * FROM per_group ORDER BY head LIMIT %(limit)s) o
       ), '[]'::jsonb)
ON CONFLICT (queue_id) DO UPDATE
SET counted_at = excluded.counted_at,
    group_count = excluded.group_count,
    largest = excluded.largest,
    oldest = excluded.oldest;

-- name: group_census_get
-- A FIFO queue's latest group census, if any.
SELECT counted_at, group_count, largest, oldest FROM queue_group_census WHERE queue_id = %(queue_id)s;

-- name: group_heads
-- The head (first message) of each of these groups now: one probe of messages_group_order_idx
-- per group. A group with no message left is not answered.
SELECT g.group_id, h.id AS sequence_number, h.sent_at,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - h.sent_at)::float8 AS age_seconds,
       h.state::text AS state, h.receive_count
FROM unnest(%(group_ids)s::text[]) AS g(group_id)
CROSS JOIN LATERAL (
    SELECT m.id, m.sent_at, m.state, m.receive_count
    FROM messages m
    WHERE m.queue_id = %(queue_id)s AND m.group_id = g.group_id
    ORDER BY m.id
    LIMIT 1
) h;

-- name: group_in_flight
-- A FIFO queue's groups a receive holds, longest held first: the messages in flight under each
-- lease, when it was taken (their receive: message_groups keeps no start time, and every
-- message of a lease was received by it, so the earliest last_received_at is the lease's) and
-- when it ends. Reads messages_group_lease_idx, which holds the in-flight FIFO messages only:
-- the cost follows what is in flight, not what the queue holds.
SELECT m.group_id, count(*) AS messages, min(m.last_received_at) AS leased_at,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - min(m.last_received_at))::float8
           AS lease_age_seconds,
       max(m.visible_at) AS lease_expires_at
FROM messages m
WHERE m.queue_id = %(queue_id)s AND m.group_id IS NOT NULL AND m.lease_id IS NOT NULL
GROUP BY m.group_id
ORDER BY leased_at, m.group_id
LIMIT %(limit)s;
