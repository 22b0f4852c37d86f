"""Receiving messages: the long poll, and one statement for the concurrent receives of a queue.

Part of the message service (app/service/messages.py): its receives run here; what a receive
hands to a client that has left goes back through the service's give_back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from app.db import finish, moves, receive, send
from app.db.engine import Database
from app.db.receive import Delivery
from app.db.rows import Conn
from app.domain import Queue, ReceivedMessage
from app.metrics import DEAD_LETTERED, FLUSH_SIZE, RECEIVED
from app.service import receipts
from app.service.coalesce import Coalescer
from app.service.queues import cached_queue
from app.service.recipient import Recipient
from app.service.throughput import Throughput
from app.service.wakeup import Wakeup

# SQS keeps a ReceiveRequestAttemptId for 5 minutes.
ATTEMPT_WINDOW_SECONDS = 300
# Most FIFO receives one statement serves (each is one pqs_fifo_receive call in it).
FIFO_RECEIVES_PER_FLUSH = 64
# When something is due but other receivers hold it, look again after this long.
BUSY_RETRY_SECONDS = 0.02


def received(row: Delivery) -> ReceivedMessage:
    """A leased message as the client receives it (its receipt handle encoded)."""
    return ReceivedMessage(
        message_id=row.message_id,
        receipt_handle=receipts.encode(row.id, row.lease_id),
        body=row.body,
        group_id=row.group_id,
        dedup_id=row.dedup_id,
        sequence_number=row.id,
        receive_count=row.receive_count,
        sent_at=row.sent_at,
        first_received_at=row.first_received_at,
        attributes=row.attributes,
        attribute_types=row.attribute_types,
        sender_id=row.sender_id,
        trace_header=row.trace_header,
        source_queue_id=row.source_queue_id,
    )


class Receiver:
    """The receives of one service process."""

    def __init__(
        self,
        db: Database,
        wakeup: Wakeup | None,
        give_back: Callable[[Recipient, datetime | None], Awaitable[int]],
        throughput: Throughput,
    ) -> None:
        self.db = db
        self.throughput = throughput
        self.wakeup = wakeup
        self.give_back = give_back
        wait = db.timeout  # a caller waits for its turn no longer than for a pooled connection
        # Concurrent plain receives of a standard queue share one statement; each caller
        # submits one placeholder per message it asks for (see _receive_flush).
        self.receives: Coalescer[tuple[int, int, datetime | None], None, Delivery | None] = Coalescer(
            self._receive_flush, alone_at=1_000, wait_seconds=wait, observe=FLUSH_SIZE.labels("receive").observe
        )
        # And those of a FIFO queue: one item per receive (its max_messages), one
        # pqs_fifo_receive call per receive, all in one statement (see _fifo_receive_flush).
        self.fifo_receives: Coalescer[tuple[int, int, datetime | None], int, Sequence[Delivery]] = Coalescer(
            self._fifo_receive_flush,
            max_items=FIFO_RECEIVES_PER_FLUSH,
            alone_at=1_000,
            wait_seconds=wait,
            observe=FLUSH_SIZE.labels("fifo_receive").observe,
        )

    async def receive(
        self,
        queue_name: str,
        max_messages: int = 1,
        wait_seconds: int | None = None,
        visibility_timeout: int | None = None,
        attempt_id: str | None = None,
        consumer_id: str | None = None,
        now: datetime | None = None,
        recipient: Recipient | None = None,
    ) -> list[ReceivedMessage]:
        """Receive up to `max_messages`, waiting up to `wait_seconds` (default: the queue's) for
        the first to arrive. No pooled connection is held while waiting. With a `consumer_id`,
        `release(queue, consumer_id)` can later return everything this consumer still holds.

        With a `recipient` (the request's client, app/service/recipient.py): once it has left,
        nothing more is leased for it (it is looked at before every poll) and its wait ends at
        once; what a poll leased just as it left is given back at once (give_back) and the
        answer is empty. What it receives is handed to it, for the serving way to give back if
        the answer cannot be written. Not with an `attempt_id`: what an attempt received stays
        in flight for the attempt's retry to receive again (as SQS's ReceiveRequestAttemptId
        promises), until its visibility timeout, which each retry resets (`_repeat`)."""
        if recipient is not None and recipient.left:
            return []
        loop = asyncio.get_running_loop()
        queue = await cached_queue(self.db, queue_name)
        wait = queue.attributes.receive_wait_seconds if wait_seconds is None else wait_seconds
        timeout = queue.attributes.visibility_timeout if visibility_timeout is None else visibility_timeout
        deadline = loop.time() + wait

        dead_lettered = 0  # by the latest try of `once`: counted once it committed

        async def once(conn: Conn) -> tuple[Sequence[Delivery], float | None]:
            nonlocal dead_lettered
            dead_lettered = 0
            if attempt_id is not None:
                repeated = await self._repeat(conn, queue, attempt_id, timeout, now)
                if repeated is not None:
                    return repeated, None
            rows, dead_lettered = await self._receive_once(conn, queue, max_messages, timeout, now)
            if attempt_id is not None and rows:
                await receive.attempt_record(conn, queue.id, attempt_id, rows, ATTEMPT_WINDOW_SECONDS, now)
            if consumer_id is not None and rows:
                await receive.consumer_record(conn, queue.id, consumer_id, rows)
            due = None
            if not rows and wait > 0:
                due = await receive.next_due(conn, queue.id, queue.fifo)
            return rows, due

        if attempt_id is None and consumer_id is None and queue.attributes.dead_letter is None:
            # The common case is one statement, atomic by itself (shared by concurrent receives
            # of the queue): no explicit transaction.
            async def due_in(conn: Conn) -> tuple[Sequence[Delivery], float | None]:
                return [], await receive.next_due(conn, queue.id, queue.fifo)

            async def simple_once(_: Conn | None = None) -> tuple[Sequence[Delivery], float | None]:
                if queue.fifo:
                    [rows] = await self.fifo_receives.submit((queue.id, timeout, now), [max_messages])
                else:
                    taken = await self.receives.submit((queue.id, timeout, now), [None] * max_messages)
                    rows = [row for row in taken if row is not None]
                if rows or wait <= 0:
                    return rows, None
                return await self.db.run_single(due_in)

            poll = simple_once
        else:

            async def poll(_: Conn | None = None) -> tuple[Sequence[Delivery], float | None]:
                found = await self.db.run(once)
                DEAD_LETTERED.inc(dead_lettered)
                self.throughput.dead_lettered(queue.id, dead_lettered, now)
                return found

        async def answer(rows: Sequence[Delivery]) -> list[ReceivedMessage]:
            got = [received(r) for r in rows]
            if recipient is not None and attempt_id is None:
                recipient.hand(queue_name, got)
                if recipient.left:
                    # It left while the poll ran (a shared statement may have served it too).
                    await self.give_back(recipient, now)
                    return []
            RECEIVED.inc(len(got))
            return got

        if self.wakeup is None or wait <= 0 or self.wakeup.draining:
            rows, _ = await poll()
            return await answer(rows)

        with (
            self.wakeup.subscribe(queue.id) as event,
            recipient.waking(event) if recipient is not None else contextlib.nullcontext(),
        ):
            while True:
                event.clear()
                if recipient is not None and recipient.left:
                    return []
                rows, due = await poll()
                remaining = deadline - loop.time()
                if rows or remaining <= 0 or self.wakeup.draining:
                    return await answer(rows)
                pause = remaining
                if due is not None:
                    pause = min(pause, max(due, BUSY_RETRY_SECONDS))
                if not self.wakeup.connected.is_set():
                    pause = min(pause, 1.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), timeout=pause)

    @staticmethod
    async def _repeat(
        conn: Conn, queue: Queue, attempt_id: str, visibility_timeout: int, now: datetime | None
    ) -> Sequence[Delivery] | None:
        """A retry of a receive attempt (None: no such attempt in its window): what the attempt
        handed out and is still in flight, the same receipts, hidden for `visibility_timeout`
        again (SQS documents that a retry resets the visibility timeout)."""
        attempt = await receive.attempt_get(conn, queue.id, attempt_id, now)
        if attempt is None:
            return None
        if queue.fifo:
            # Groups before their messages, as every writer of a FIFO queue takes them.
            await finish.group_lock_for_messages(conn, queue.id, attempt.sequence_numbers)
        rows = await receive.attempt_repeat(conn, queue.id, attempt, visibility_timeout, now)
        if rows:
            if queue.fifo:
                await finish.group_extend(conn, queue.id, [r.group_id for r in rows if r.group_id is not None])
            # A shorter timeout than before (0: visible at once) may make them due sooner.
            await send.queue_wake(conn, queue.id)
        return rows

    async def _receive_flush(self, key: tuple[int, int, datetime | None], wanted: list[None]) -> list[Delivery | None]:
        """One statement for the concurrent plain receives of a standard queue (no dead-letter
        queue, no attempt id). Messages go to the callers in arrival order, each up to what it
        asked for; when fewer are due, the later callers get fewer or none (and long-poll).
        Standard queues promise no order, so splitting one statement's rows is safe; FIFO
        receives share a statement differently (_fifo_receive_flush: one call per receiver)."""
        queue_id, timeout, now = key

        async def take(conn: Conn) -> Sequence[Delivery]:
            return await receive.message_receive_standard(conn, queue_id, len(wanted), timeout, None, now)

        rows: list[Delivery | None] = list(await self.db.run_single(take))
        return rows + [None] * (len(wanted) - len(rows))

    async def _fifo_receive_flush(
        self, key: tuple[int, int, datetime | None], limits: list[int]
    ) -> list[Sequence[Delivery]]:
        """One statement, one commit, for the concurrent plain receives of a FIFO queue (no
        dead-letter queue, no attempt or consumer id): receivers are served in arrival order,
        each by its own pqs_fifo_receive call that sees what the earlier ones leased, so each
        group still goes to exactly one receiver, whole prefix in order."""
        queue_id, timeout, now = key

        async def take(conn: Conn) -> Sequence[Sequence[Delivery]]:
            return await receive.fifo_receive_many(conn, queue_id, limits, timeout, now)

        return list(await self.db.run_single(take))

    async def _receive_once(
        self, conn: Conn, queue: Queue, limit: int, visibility_timeout: int, now: datetime | None
    ) -> tuple[Sequence[Delivery], int]:
        """The messages received, and how many were moved to the dead-letter queue instead."""
        max_rc = queue.attributes.dead_letter.max_receive_count if queue.attributes.dead_letter else None
        if not queue.fifo:
            rows = await receive.message_receive_standard(conn, queue.id, limit, visibility_timeout, max_rc, now)
            dead = [r.id for r in rows if r.dead]
            if dead:
                await self._dead_letter(conn, queue, dead, [], now)
            return [r for r in rows if not r.dead], len(dead)

        fifo_rows = await receive.fifo_receive(conn, queue.id, limit, visibility_timeout, max_rc, now)
        delivered = sorted((r for r in fifo_rows if not r.dead), key=lambda r: (r.ord, r.id))
        dead_rows = [r for r in fifo_rows if r.dead]
        if dead_rows:
            groups = [r.group_id for r in dead_rows if r.group_id is not None]
            await self._dead_letter(conn, queue, [r.id for r in dead_rows], groups, now)
            served = {r.group_id for r in delivered}
            idle = [g for g in groups if g not in served]
            if idle:
                await finish.group_release(conn, queue.id, idle, served=False, now=now)
        return delivered, len(dead_rows)

    async def _dead_letter(
        self, conn: Conn, queue: Queue, ids: list[int], group_ids: list[str], now: datetime | None
    ) -> None:
        assert queue.dead_letter_queue_id is not None
        if queue.fifo:
            await send.group_lock_for_send(conn, queue.dead_letter_queue_id, dict.fromkeys(group_ids, 0), now)
        await moves.message_dead_letter(conn, queue.id, queue.name, queue.dead_letter_queue_id, ids, now)
        await send.queue_wake(conn, queue.dead_letter_queue_id)
