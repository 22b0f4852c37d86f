-- name: group_lock_for_send
-- Lock the groups a send writes to, creating rows for new groups, in group order so two
-- senders never deadlock. A group with no message becomes available when its first new
-- message is due; a group that has messages keeps its place in the rotation. This runs
-- before sequence numbers are drawn, so inside a group numbers follow commit order.
INSERT INTO message_groups AS g (queue_id, group_id, available_at)
SELECT %(queue_id)s, t.group_id, coalesce(%(now)s::timestamptz, now()) + make_interval(secs => t.delay)
FROM unnest(%(group_ids)s::text[], %(delays)s::int[]) AS t(group_id, delay)
ORDER BY t.group_id
ON CONFLICT (queue_id, group_id) DO UPDATE
SET available_at = coalesce(g.available_at, excluded.available_at);

-- name: message_insert
-- Enqueue a batch. Sequence numbers are drawn in request order. Entries with a dedup key
-- first claim it (in key order, so concurrent claims never deadlock): the claim wins when
-- the key is unknown or its window has ended, and only winners and entries without a key
-- are inserted. Returns every entry's sequence number and whether it was inserted.
-- The batch arrives as one JSON array of entry objects (see _entries_document).
WITH entry AS (
    SELECT *
    FROM json_to_recordset(%(entries)s::json) AS e(
        ord int, message_id uuid, group_id text, dedup_id text, scope_key text, body jsonb, attributes jsonb,
        delay int
    )
),
numbered AS (
    -- (a JSON null body comes out of json_to_recordset as SQL NULL: coalesced back below)
    -- volatile target lists are evaluated after ORDER BY: numbers follow request order
    SELECT e.*, nextval('message_seq') AS id
    FROM entry e
    ORDER BY e.ord
),
claimed AS (
    INSERT INTO message_dedup AS d (queue_id, scope_key, dedup_id, message_id, sequence_number, expires_at)
    SELECT %(queue_id)s, n.scope_key, n.dedup_id, n.message_id, n.id,
           coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(dedup_window)s)
    FROM numbered n
    WHERE n.dedup_id IS NOT NULL
    ORDER BY n.scope_key, n.dedup_id
    ON CONFLICT (queue_id, scope_key, dedup_id) DO UPDATE
    SET message_id = excluded.message_id,
        sequence_number = excluded.sequence_number,
        expires_at = excluded.expires_at
    WHERE d.expires_at <= coalesce(%(now)s::timestamptz, now())
    RETURNING d.sequence_number
),
inserted AS (
    INSERT INTO messages (id, queue_id, message_id, group_id, dedup_id, body, attributes, sent_at, visible_at)
    SELECT n.id, %(queue_id)s, n.message_id, n.group_id, n.dedup_id, coalesce(n.body, 'null'::jsonb), n.attributes,
           coalesce(%(now)s::timestamptz, now()),
           coalesce(%(now)s::timestamptz, now()) + make_interval(secs => n.delay)
    FROM numbered n
    WHERE n.dedup_id IS NULL OR n.id IN (SELECT sequence_number FROM claimed)
    ORDER BY n.id
    RETURNING id
)
SELECT n.ord, n.id, i.id IS NOT NULL AS inserted
FROM numbered n
LEFT JOIN inserted i ON i.id = n.id
ORDER BY n.ord;

-- name: dedup_lookup
-- The message that first claimed each of these dedup keys (answers a duplicate send).
SELECT d.scope_key, d.dedup_id, d.message_id, d.sequence_number
FROM message_dedup d
JOIN unnest(%(scope_keys)s::text[], %(dedup_ids)s::text[]) AS k(scope_key, dedup_id)
  ON d.scope_key = k.scope_key AND d.dedup_id = k.dedup_id
WHERE d.queue_id = %(queue_id)s;

-- name: queue_wake
-- Wake long-polling receivers of a queue, in every service process, once this commits.
SELECT pg_notify('pqs_queue', %(queue_id)s::text);
