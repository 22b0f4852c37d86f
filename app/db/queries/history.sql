-- name: history_page
-- A queue's finished messages, newest first, below the history id `before_id` (NULL: from the
-- newest), those of the outcome and group asked (NULL: any), at most `limit` rows.
-- message_history_queue_idx (queue_id, id) read backwards is the queue's history in that order,
-- however many rows other queues wrote around it (migration 0016). The filters are not in the
-- index: they test each row the walk reaches, and the walk stops after `walk` rows whatever
-- they matched, so a group or an outcome that is rare in a busy queue's history costs at most
-- `walk` rows a page, not the queue's whole history. The last row walked comes out too, matched
-- or not (`walked` = `walk`), so the caller knows where the next page starts.
-- The queue is bounded on both sides, not `queue_id = x`, and the order is (queue_id, id): an
-- order only this index gives. With `=`, the primary key read backwards gives the same order
-- with a filter, and the planner took it wherever the queue looked like a large part of the
-- table (a generic plan, two or three queues): for a quiet queue that read the whole history of
-- the others, back from the table's end, to find 20 rows (tests/db/test_plans.py pins this).
SELECT w.id, w.message_id, w.sequence_number, w.group_id, w.dedup_id, w.outcome, w.sent_at,
       w.first_received_at, w.last_received_at, w.finished_at, w.receive_count, w.result, w.error,
       w.matches, w.walked
FROM (
    SELECT h.queue_id, h.id, h.message_id, h.sequence_number, h.group_id, h.dedup_id, h.outcome::text AS outcome,
           h.sent_at, h.first_received_at, h.last_received_at, h.finished_at, h.receive_count,
           h.result, h.error,
           coalesce(h.outcome = %(outcome)s::history_outcome, true)
               AND (%(group_id)s::text IS NULL OR coalesce(h.group_id = %(group_id)s::text, false)) AS matches,
           row_number() OVER (ORDER BY h.queue_id DESC, h.id DESC) AS walked
    FROM message_history h
    WHERE h.queue_id >= %(queue_id)s AND h.queue_id <= %(queue_id)s
      AND h.id < coalesce(%(before_id)s::bigint, 9223372036854775807)
    ORDER BY h.queue_id DESC, h.id DESC
    LIMIT %(walk)s
) AS w
WHERE w.matches OR w.walked = %(walk)s
ORDER BY w.queue_id DESC, w.id DESC
LIMIT %(limit)s;
