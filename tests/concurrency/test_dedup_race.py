"""Parallel sends of one deduplication id: exactly one is enqueued, every sender is answered with
that message's id and sequence number."""

from __future__ import annotations

import asyncio

import pytest

from app.domain import SendEntry, SendResult
from app.service.messages import MessageService
from app.service.queues import QueueService
from tests.concurrency.workers import messages_left
from tests.factories import make_queue


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
async def test_parallel_sends_of_one_dedup_id_enqueue_one_message(
    queues: QueueService, messages: MessageService, db_url: str, fifo: bool
) -> None:
    senders, rounds = 12, 5
    name = await make_queue(queues, fifo=fifo)

    for r in range(rounds):
        # Each sender uses its own group on FIFO queues, so only the dedup claim orders them.
        entries = [
            SendEntry(body={"sender": s}, group_id=f"g{s}" if fifo else None, dedup_id=f"once-{r}")
            for s in range(senders)
        ]
        outcomes = await asyncio.gather(*(messages.send(name, [e]) for e in entries))

        results = [result for [result] in outcomes]
        assert all(isinstance(result, SendResult) for result in results), results
        sent = [result for result in results if isinstance(result, SendResult)]
        assert sum(not result.duplicate for result in sent) == 1, sent
        assert len({(result.message_id, result.sequence_number) for result in sent}) == 1, sent

    assert await messages_left(db_url) == rounds
