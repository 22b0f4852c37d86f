-- name: history_last_id
-- The last history id drawn from the sequence, by any transaction, committed or not (0: none).
SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('message_history', 'id')::regclass), 0) AS last_id;

-- name: history_writers
-- Transactions that may be writing history now: an INSERT takes the table's row-exclusive lock
-- before it draws an id from the sequence and keeps it until its transaction ends.
SELECT coalesce(array_agg(DISTINCT l.virtualtransaction), '{}'::text[]) AS vxids
FROM pg_locks l
WHERE l.locktype = 'relation'
  AND l.relation = 'message_history'::regclass
  AND l.mode = 'RowExclusiveLock'
  AND l.pid IS DISTINCT FROM pg_backend_pid();

-- name: history_writers_left
-- Which of these transactions are still running (each holds its own virtual transaction id).
SELECT coalesce(array_agg(l.virtualxid), '{}'::text[]) AS vxids
FROM pg_locks l
WHERE l.locktype = 'virtualxid' AND l.virtualxid = ANY(%(vxids)s::text[]);

-- name: history_range_count
-- How many history rows a batch's id range holds (the archive must hold as many).
SELECT count(*) AS n FROM message_history WHERE id > %(from_id)s AND id <= %(to_id)s;

-- name: history_id_bounds
-- The smallest and largest history ids (for a partitioned read of the whole table).
SELECT coalesce(min(id), 0) AS low, coalesce(max(id), 0) AS high FROM message_history;

-- name: history_rows
-- What the archive keeps of each history row, read in id ranges by the archive's tasks (ADBC)
-- and by the report's --from-database (Spark's JDBC source). Types neither maps to the
-- archive's (uuid, enum, jsonb) come as text. {from_id} and {to_id} are filled
-- in with integers by the caller.
SELECT h.id, h.queue_id, h.queue_name, h.message_id::text AS message_id, h.sequence_number, h.group_id,
       h.dedup_id, h.sent_at, h.first_received_at, h.last_received_at, h.finished_at, h.receive_count,
       h.outcome::text AS outcome, h.result::text AS result, h.error::text AS error
FROM message_history h
WHERE h.id > {from_id} AND h.id <= {to_id};

-- name: archive_lock
-- One archive run per archive at a time (session lock: it goes with the connection).
SELECT pg_try_advisory_lock(%(lock_class)s, hashtext(%(archive)s)) AS locked;

-- name: export_pending
-- The archive's batch that was started and not committed (a failed or interrupted run).
SELECT id, from_id, to_id FROM history_exports WHERE archive = %(archive)s AND committed_at IS NULL;

-- name: export_watermark
-- The archive's watermark: every history id up to it is in a committed batch.
SELECT coalesce(max(to_id), 0) AS watermark
FROM history_exports
WHERE archive = %(archive)s AND committed_at IS NOT NULL;

-- name: export_begin
-- Record a batch before writing it, so that a run that fails finishes the same range next time.
INSERT INTO history_exports (archive, from_id, to_id)
VALUES (%(archive)s, %(from_id)s, %(to_id)s)
RETURNING id;

-- name: export_commit
-- The batch's Parquet files are committed and hold `rows` rows: move the watermark.
UPDATE history_exports SET rows = %(rows)s, committed_at = now()
WHERE id = %(id)s AND committed_at IS NULL;

-- name: export_unpruned
-- Committed batches of the archive whose rows are still in message_history.
SELECT id, from_id, to_id, rows
FROM history_exports
WHERE archive = %(archive)s AND committed_at IS NOT NULL AND pruned_at IS NULL
ORDER BY id;

-- name: export_prune
-- Delete a committed batch's rows from history (the one sanctioned way; see migration 0006).
SELECT pqs_history_prune(%(id)s) AS deleted;
