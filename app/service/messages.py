"""Message operations: send, receive (its long poll in app/service/receive.py), ack, nack, visibility.

Every public method runs its database work in transactions of its own (the caller passes no
connection); `now` is injectable so that tests move the clock instead of sleeping (None: the
database's clock).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.db import finish, receive, send
from app.db.engine import Database
from app.db.rows import Conn, Receipt
from app.domain import EntryFailure, MessageInput, Queue, SendResult
from app.errors import InvalidMessage, InvalidReceiptHandle, ReceiptNotFound
from app.metrics import ACKED, FLUSH_SIZE, NACKED, SENT
from app.service import enqueue, receipts
from app.service.coalesce import Coalescer
from app.service.queues import cached_queue, get_queue
from app.service.receive import Receiver
from app.service.recipient import Recipient
from app.service.throughput import Throughput
from app.service.validation import canonical_json
from app.service.wakeup import Wakeup


@dataclass(frozen=True)
class ReceiptEntry:
    """One entry of an ack, nack or visibility batch."""

    id: str
    receipt_handle: str
    result: Any = None
    error: Any = None
    delay_seconds: int = 0
    visibility_timeout: int = 0


BatchOutcome = dict[str, EntryFailure | None]
Done = tuple[Receipt, str | None]  # the receipt an operation changed a message under, and its group


def _count_sent(results: Sequence[SendResult | EntryFailure]) -> int:
    """Count (pqs_messages_total) the messages a committed send enqueued: not its duplicates, nor
    its refused entries; how many."""
    count = sum(1 for r in results if isinstance(r, SendResult) and not r.duplicate)
    SENT.inc(count)
    return count


class MessageService:
    """Send, receive and finish messages."""

    def __init__(
        self,
        db: Database,
        wakeup: Wakeup | None,
        dedup_window_seconds: int = 300,
        throughput: Throughput | None = None,
    ) -> None:
        self.db = db
        self.wakeup = wakeup
        self.dedup_window = dedup_window_seconds
        # Per queue and minute, in memory: sent, acked, dead-lettered (app/service/throughput.py).
        self.throughput = throughput or Throughput(db)
        # Group commit: concurrent sends (and acks) of one queue share a statement and a commit.
        # A caller waits for its turn no longer than for a pooled connection (then 503).
        wait = db.timeout
        self.sends: Coalescer[tuple[str, datetime | None], MessageInput, SendResult | EntryFailure] = Coalescer(
            self._send_flush, wait_seconds=wait, observe=FLUSH_SIZE.labels("send").observe
        )
        self.acks: Coalescer[tuple[str, datetime | None], tuple[Any, Receipt], bool] = Coalescer(
            self._ack_flush, wait_seconds=wait, observe=FLUSH_SIZE.labels("ack").observe
        )
        self.receiver = Receiver(db, wakeup, self.give_back, self.throughput)
        # Receive up to max_messages, waiting up to wait_seconds (Receiver.receive): the receiver's
        # own method, so that its signature is written once.
        self.receive = self.receiver.receive
        # The receivers' coalescers (concurrent receives of a queue share a statement).
        self.receives = self.receiver.receives
        self.fifo_receives = self.receiver.fifo_receives

    # -- send ---------------------------------------------------------------------------------

    async def send(
        self, queue_name: str, entries: Sequence[MessageInput], now: datetime | None = None
    ) -> list[SendResult | EntryFailure]:
        """Enqueue a batch in one transaction; per entry a SendResult or why it was refused.

        Duplicates (same dedup key inside the window, also within the batch) are answered with
        the first message's id and sequence number and `duplicate=True`; nothing is enqueued.
        Concurrent sends to the same queue are committed together (group commit); each caller
        is answered after that commit, with the results of its own entries.
        """
        return await self.sends.submit((queue_name, now), entries)

    async def _send_flush(
        self, key: tuple[str, datetime | None], entries: list[MessageInput]
    ) -> list[SendResult | EntryFailure]:
        queue_name, now = key
        cached = await cached_queue(self.db, queue_name)
        if not cached.fifo:
            # A standard queue's send is one statement that takes the queue's fence itself: no
            # BEGIN, queue look-up and COMMIT round trips. Entries are checked against the cached
            # attributes, so a change made by another process applies within the cache's ttl.
            async def single(conn: Conn) -> list[SendResult | EntryFailure] | None:
                return await enqueue.enqueue_entries(conn, cached, entries, self.dedup_window, now, fenced=True)

            sent = await self.db.run_single(single)
            if sent is not None:
                count = _count_sent(sent)
                if count:
                    self.throughput.sent(cached.id, count, now)
                    await self._wake(cached.id)
                return sent
            # The cached queue is gone: look the name up again, inside the fence.
            self.db.queue_cache.forget(queue_name)

        async def work(conn: Conn) -> tuple[int, list[SendResult | EntryFailure]]:
            queue = await get_queue(conn, queue_name, for_send=True)
            sent = await enqueue.enqueue_entries(conn, queue, entries, self.dedup_window, now)
            assert sent is not None
            return queue.id, sent

        queue_id, results = await self.db.run(work)
        count = _count_sent(results)
        if count:
            self.throughput.sent(queue_id, count, now)
            await self._wake(queue_id)
        return results

    async def _wake(self, queue_id: int) -> None:
        """After a commit: wake long-polls of the queue, in every process."""
        await enqueue.wake_after_commit(self.wakeup or self.db, queue_id)

    # -- receive ------------------------------------------------------------------------------

    # -- ack, nack, visibility ------------------------------------------------------------------

    async def _decode(
        self, queue_name: str, entries: Sequence[ReceiptEntry]
    ) -> tuple[BatchOutcome, list[tuple[ReceiptEntry, Receipt]]]:
        """Split entries into failures (bad handle, unstorable result or error) and valid receipts."""
        outcome: BatchOutcome = {}
        valid: list[tuple[ReceiptEntry, Receipt]] = []
        for entry in entries:
            try:
                seq, lease = receipts.decode(entry.receipt_handle)
                for value in (entry.result, entry.error):
                    if value is not None:
                        canonical_json(value)
            except (InvalidReceiptHandle, InvalidMessage) as exc:
                outcome[entry.id] = EntryFailure(exc.code, exc.message)
                continue
            valid.append((entry, Receipt(seq, lease)))
        if not valid:
            # Nothing to do, but an unknown queue is still a 404.
            await cached_queue(self.db, queue_name)
        return outcome, valid

    @staticmethod
    def _settle(outcome: BatchOutcome, valid: list[tuple[ReceiptEntry, Receipt]], done: set[Receipt]) -> BatchOutcome:
        """Each entry succeeded if its receipt, lease and all, is one that took effect: a message
        named under a stale receipt next to its current one changed under the current one only."""
        for entry, receipt in valid:
            outcome[entry.id] = (
                None
                if receipt in done
                else EntryFailure(
                    ReceiptNotFound.code,
                    "no in-flight message holds this receipt handle (acked, expired, or received again since)",
                )
            )
        return outcome

    async def _finish(
        self,
        queue_name: str,
        entries: Sequence[ReceiptEntry],
        change: Callable[[Conn, Queue, list[tuple[ReceiptEntry, Receipt]]], Awaitable[list[Done]]],
        after: Callable[[Conn, Queue, list[str]], Awaitable[None]],
    ) -> BatchOutcome:
        """The shape shared by ack, nack and visibility: decode the handles, then in one
        transaction lock the FIFO groups (before their messages), `change` the messages under
        current receipts, and let `after` fix up the groups that were touched."""
        outcome, valid = await self._decode(queue_name, entries)
        if not valid:
            return outcome

        queue = await cached_queue(self.db, queue_name)

        async def work(conn: Conn) -> set[Receipt]:
            if queue.fifo:
                await finish.group_lock_for_messages(conn, queue.id, [r.sequence_number for _, r in valid])
            done = await change(conn, queue, valid)
            if done:
                await after(conn, queue, [g for _, g in done if g is not None])
            return {receipt for receipt, _ in done}

        return self._settle(outcome, valid, await self.db.run(work))

    async def ack(self, queue_name: str, entries: Sequence[ReceiptEntry], now: datetime | None = None) -> BatchOutcome:
        """Finish messages (into history as acked, with their result); entry id -> failure or None.
        One statement (pqs_finish): groups locked, messages moved to history, groups released."""
        outcome, valid = await self._decode(queue_name, entries)
        if not valid:
            return outcome
        flags = await self.acks.submit((queue_name, now), [(e.result, r) for e, r in valid])
        done = {r for (_, r), ok in zip(valid, flags, strict=True) if ok}
        return self._settle(outcome, valid, done)

    async def _ack_flush(self, key: tuple[str, datetime | None], items: list[tuple[Any, Receipt]]) -> list[bool]:
        """Ack the receipts of concurrent ack calls in one statement; per item, whether it was acked.
        Matched by whole receipt: two calls may name one message, one under the lease of a receive
        whose visibility timeout ran out, the other under the current one; only the latter acked."""
        queue_name, now = key
        queue = await cached_queue(self.db, queue_name)
        receipts_ = [r for _, r in items]
        results = [result for result, _ in items]
        acked, woke = await self.db.run_single(
            lambda conn: finish.message_ack(conn, queue.id, queue.name, receipts_, results, now)
        )
        ACKED.inc(len(acked))
        self.throughput.acked(queue.id, len(acked), now)
        if woke:
            await self._wake(queue.id)
        done = set(acked)
        return [r in done for r in receipts_]

    async def nack(self, queue_name: str, entries: Sequence[ReceiptEntry], now: datetime | None = None) -> BatchOutcome:
        """Return messages for another try after their delay, recording the error."""

        async def change(conn: Conn, queue: Queue, valid: list[tuple[ReceiptEntry, Receipt]]) -> list[Done]:
            delays, errors = [e.delay_seconds for e, _ in valid], [e.error for e, _ in valid]
            return await finish.message_nack(conn, queue.id, [r for _, r in valid], delays, errors, now)

        async def after(conn: Conn, queue: Queue, groups: list[str]) -> None:
            if groups:
                await finish.group_release(conn, queue.id, groups, served=True, now=now)
            await send.queue_wake(conn, queue.id)

        outcome = await self._finish(queue_name, entries, change, after)
        NACKED.inc(sum(1 for failure in outcome.values() if failure is None))
        return outcome

    async def release(self, queue_name: str, consumer_id: str, now: datetime | None = None) -> int:
        """Return at once every message `consumer_id` holds in flight on this queue (a consumer
        that restarts or gives up), as a nack without delay would; FIFO groups move on. Messages
        it received without its consumer id, or acked, or that timed out meanwhile, are not
        touched. How many were returned."""
        queue = await cached_queue(self.db, queue_name)

        async def held(conn: Conn) -> list[Receipt]:
            return await receive.consumer_held(conn, queue.id, consumer_id)

        receipts_held = await self.db.run_single(held)
        if not receipts_held:
            return 0
        error = {"released": True, "consumer_id": consumer_id}
        entries = [
            ReceiptEntry(
                id=str(r.sequence_number), receipt_handle=receipts.encode(r.sequence_number, r.lease_id), error=error
            )
            for r in receipts_held
        ]
        outcome = await self.nack(queue_name, entries, now)
        return sum(1 for failure in outcome.values() if failure is None)

    async def give_back(self, recipient: Recipient, now: datetime | None = None) -> int:
        """Return at once what a receive handed `recipient`, whose client left before it had the
        answer (see app/service/recipient.py); how many messages went back.

        The consumer never saw these messages, so this undoes the receive rather than counting
        as one (message_give_back): the receive count goes back down, so a give-back never
        brings a message nearer its dead-letter queue; nothing is recorded as an error or in
        history. The messages are due at once, behind those already due (a nack without delay
        would put them there too); a FIFO group gets back its whole prefix, in order, and is
        free for the next receive. Messages whose receipt is no longer current are untouched."""
        handed = recipient.take_back()
        if handed is None:
            return 0
        queue_name, got = handed
        entries = [ReceiptEntry(id=str(m.sequence_number), receipt_handle=m.receipt_handle) for m in got]

        async def change(conn: Conn, queue: Queue, valid: list[tuple[ReceiptEntry, Receipt]]) -> list[Done]:
            return await finish.message_give_back(conn, queue.id, [r for _, r in valid], now)

        async def after(conn: Conn, queue: Queue, groups: list[str]) -> None:
            if groups:
                await finish.group_release(conn, queue.id, groups, served=False, now=now)
            await send.queue_wake(conn, queue.id)

        outcome = await self._finish(queue_name, entries, change, after)
        return sum(1 for failure in outcome.values() if failure is None)

    async def change_visibility(
        self, queue_name: str, entries: Sequence[ReceiptEntry], now: datetime | None = None
    ) -> BatchOutcome:
        """Set the remaining visibility timeout of in-flight messages."""

        async def change(conn: Conn, queue: Queue, valid: list[tuple[ReceiptEntry, Receipt]]) -> list[Done]:
            timeouts = [e.visibility_timeout for e, _ in valid]
            return await finish.message_visibility(conn, queue.id, [r for _, r in valid], timeouts, now)

        async def after(conn: Conn, queue: Queue, groups: list[str]) -> None:
            if groups:
                await finish.group_extend(conn, queue.id, groups)
            await send.queue_wake(conn, queue.id)

        return await self._finish(queue_name, entries, change, after)
