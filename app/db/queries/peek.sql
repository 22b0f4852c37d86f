-- name: message_peek_standard
-- The next messages of a standard queue, without receiving them: in the order a receive would
-- consider them (due first), in flight or not. Reads the standard receive's own index
-- (queue_id, visible_at) in order and stops after `limit` rows, whatever the queue holds.
SELECT m.id AS sequence_number, m.message_id, m.body, m.group_id, m.dedup_id, m.state::text AS state,
       m.receive_count, m.sent_at, m.visible_at, m.first_received_at, m.last_error, m.attributes,
       m.attribute_types, m.sender_id, m.trace_header, s.name AS source_queue
FROM messages m
LEFT JOIN queues s ON s.id = m.source_queue_id
WHERE m.queue_id = %(queue_id)s AND m.group_id IS NULL
ORDER BY m.visible_at, m.id
LIMIT %(limit)s;

-- name: message_peek_fifo
-- The messages of a FIFO queue, without receiving them: group by group in name order, each
-- group's in sequence order (its head first). Reads the group-order index (queue_id, group_id,
-- id) in order and stops after `limit` rows: cheap at any size, where "oldest first across
-- groups" would sort every message of the queue.
SELECT m.id AS sequence_number, m.message_id, m.body, m.group_id, m.dedup_id, m.state::text AS state,
       m.receive_count, m.sent_at, m.visible_at, m.first_received_at, m.last_error, m.attributes,
       m.attribute_types, m.sender_id, m.trace_header, s.name AS source_queue
FROM messages m
LEFT JOIN queues s ON s.id = m.source_queue_id
WHERE m.queue_id = %(queue_id)s AND m.group_id IS NOT NULL
ORDER BY m.group_id, m.id
LIMIT %(limit)s;
