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
-- Enqueue a batch. Sequence numbers are drawn in entry order. Entries with a dedup key
-- first claim it (in key order, so concurrent claims never deadlock): the claim wins when
-- the key is unknown or its window has ended, and only winners and entries without a key
-- are inserted. One statement for sends and backfills alike, so dedup and sequence numbers
-- behave the same whichever way messages arrive; its variants differ in three slots.
-- `entry` is where the entries come from: message_entry_json (a send), inside the queue's
-- send fence for a standard queue's (message_entry_json_fenced), or message_entry_staged (a
-- backfill). As written here: no entries, with the columns an entry source gives.
-- `take_over` is what a claim does with a key that is already there: it wins when the key's
-- window has ended (and then holds the new message), else the entry is a duplicate. A send
-- always has it. A backfill first runs the statement without it, a plain insert, which costs
-- far less than a speculative one (measured); if any of its keys is there, that insert fails on
-- message_dedup_pkey, and the backfill runs the statement again with it (from a savepoint), so
-- the claims are a send's either way.
-- `winners` keeps the entries whose claim won (or that have no key). Without take_over every
-- claim wins or the statement fails, so the plain insert leaves it out: its claims then need
-- no hash of their sequence numbers, and run (to completion, as every data-modifying CTE does)
-- after the messages' insert.
-- `answer` is every entry's sequence number and whether it was inserted (a send), or
-- message_insert_count (a backfill).
-- variant: message_send (entry = message_entry_json)
-- variant: message_send_fenced (entry = message_entry_json_fenced)
-- variant: message_insert_staged (entry = message_entry_staged, answer = message_insert_count)
-- variant: message_insert_staged_new_keys (entry = message_entry_staged, take_over = -, winners = -, answer = message_insert_count)
WITH entry AS (
    /* slot: entry */
    SELECT NULL::int AS ord, NULL::uuid AS message_id, NULL::text AS group_id, NULL::text AS dedup_id,
           ''::text AS scope_key, NULL::jsonb AS body, '{}'::jsonb AS attributes, 0 AS delay,
           NULL::jsonb AS attribute_types, NULL::text AS sender_id, NULL::text AS trace_header
    WHERE false
    /* end slot */
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
    -- Key order in bytes ("C"): any one order keeps claims from deadlocking, as every claim is
    -- this statement's, and comparing bytes spares the sort a strcoll() per comparison.
    ORDER BY n.scope_key COLLATE "C", n.dedup_id COLLATE "C"
    /* slot: take_over */
    ON CONFLICT (queue_id, scope_key, dedup_id) DO UPDATE
    SET message_id = excluded.message_id,
        sequence_number = excluded.sequence_number,
        expires_at = excluded.expires_at
    WHERE d.expires_at <= coalesce(%(now)s::timestamptz, now())
    /* end slot */
    RETURNING d.sequence_number
),
inserted AS (
    INSERT INTO messages (
        id, queue_id, message_id, group_id, dedup_id, body, attributes, sent_at, visible_at,
        attribute_types, sender_id, trace_header
    )
    SELECT n.id, %(queue_id)s, n.message_id, n.group_id, n.dedup_id, coalesce(n.body, 'null'::jsonb), n.attributes,
           coalesce(%(now)s::timestamptz, now()),
           coalesce(%(now)s::timestamptz, now()) + make_interval(secs => n.delay),
           n.attribute_types, n.sender_id, n.trace_header
    -- (numbered's rows come in entry order, so in sequence order: no sort by id)
    FROM numbered n
    /* slot: winners */
    WHERE n.dedup_id IS NULL OR n.id IN (SELECT sequence_number FROM claimed)
    /* end slot */
    RETURNING id
)
/* slot: answer */
SELECT n.ord, n.id, i.id IS NOT NULL AS inserted
FROM numbered n
LEFT JOIN inserted i ON i.id = n.id
ORDER BY n.ord
/* end slot */;

-- name: message_insert_count
-- message_insert's answer to a backfill, which only counts: how many entries were inserted (the
-- others were duplicates). Spares a task's transaction the join and the transfer of a row per
-- entry. (Its context stands for message_insert's CTE of that name.)
/* context */ WITH inserted AS (SELECT NULL::bigint AS id) /* end context */
SELECT count(*) AS inserted FROM inserted;

-- name: message_entry_json
-- A send's entries: the batch as one JSON array of entry objects (see _entries_document), one
-- parameter instead of eight arrays. An entry leaves out what it does not have (group, dedup
-- id and its scope, a delay of 0, no attributes, typed attributes, sender or trace header):
-- the defaults are filled in here, and the position in the array is the entry's order.
SELECT e.ord::int AS ord, e.message_id, e.group_id, e.dedup_id, coalesce(e.scope_key, '') AS scope_key, e.body,
       coalesce(e.attributes, '{}') AS attributes, coalesce(e.delay, 0) AS delay,
       e.attribute_types, e.sender_id, e.trace_header
FROM ROWS FROM (
    json_to_recordset(%(entries)s::json) AS (
        message_id uuid, group_id text, dedup_id text, scope_key text, body jsonb, attributes jsonb, delay int,
        attribute_types jsonb, sender_id text, trace_header text
    )
) WITH ORDINALITY AS e(
    message_id, group_id, dedup_id, scope_key, body, attributes, delay, attribute_types, sender_id, trace_header, ord
);

-- name: message_entry_fenced
-- Entries (slot `entries`) behind the queue's send fence (see queue_get_for_send: the shared
-- advisory lock, then a key-share lock on the queue row). This lets a standard queue's send be
-- one statement, atomic by itself, with no transaction around it: the fence is taken before any
-- entry is read, so before any sequence number is drawn, and when a delete got the queue first
-- there are no entries (the caller sees no rows).
-- variant: message_entry_json_fenced (entries = message_entry_json)
WITH fence AS (
    SELECT q.id
    FROM queues q
    CROSS JOIN LATERAL (SELECT pg_advisory_xact_lock_shared(%(lock_class)s, q.id)) AS l
    WHERE q.id = %(queue_id)s
    FOR KEY SHARE OF q
)
SELECT e.*
FROM (
    /* slot: entries */
    SELECT 1 AS ord
    /* end slot */
) AS e
WHERE EXISTS (SELECT FROM fence);

-- name: message_stage_create
-- A backfill task's staging table: its rows are COPYed in, then enqueued in the same
-- transaction, which drops the table when it ends. `repeat` marks a row whose dedup key an
-- earlier row of the task has (the caller finds them, as a send does in its batch).
CREATE TEMPORARY TABLE pqs_staged_entry (
    ord int NOT NULL,
    message_id uuid NOT NULL,
    group_id text,
    dedup_id text,
    scope_key text NOT NULL,
    body jsonb,
    attributes jsonb NOT NULL,
    delay int NOT NULL,
    repeat boolean NOT NULL
) ON COMMIT DROP;

-- name: message_stage_copy
-- The rows of a backfill task into its staging table (COPY: one stream, no per-row statement).
COPY pg_temp.pqs_staged_entry (ord, message_id, group_id, dedup_id, scope_key, body, attributes, delay, repeat) FROM STDIN;

-- name: message_entry_staged
-- A backfill's entries: the staged rows, but for repeats of a dedup key, which are answered as
-- duplicates without being inserted (as in a send's batch). Message ids come with the rows, as
-- a send's do (random version-4 UUIDs drawn by the caller). A backfill carries no typed
-- attributes, sender or trace header.
SELECT s.ord, s.message_id, s.group_id, s.dedup_id, s.scope_key, s.body, s.attributes, s.delay,
       NULL::jsonb AS attribute_types, NULL::text AS sender_id, NULL::text AS trace_header
FROM pg_temp.pqs_staged_entry s
WHERE NOT s.repeat

-- name: message_entry_groups
-- The groups some entries (slot `entry`, as for message_insert) write to, each with its first
-- message's delay (for group_lock_for_send, as a send computes them from its entries).
-- variant: message_staged_groups (entry = message_entry_staged)
SELECT e.group_id, min(e.delay) AS delay
FROM (
    /* slot: entry */
    SELECT NULL::text AS group_id, 0 AS delay
    /* end slot */
) e
WHERE e.group_id IS NOT NULL
GROUP BY e.group_id;

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

-- name: queue_wake_many
-- Wake long-polling receivers of several queues in every service process: a process's
-- wake-ups after its commits, coalesced (app/service/wakeup.py), sent from a connection of its
-- own.
SELECT pg_notify('pqs_queue', q::text) FROM unnest(%(queue_ids)s::int[]) AS q;

-- name: queue_listen
-- Receive every process's wake-ups (queue_wake, queue_wake_many) on this session.
LISTEN pqs_queue;
