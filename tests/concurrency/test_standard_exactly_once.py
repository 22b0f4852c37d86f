"""A standard queue under parallel consumers: every message delivered and acked exactly once."""

from __future__ import annotations

from app.domain import SendEntry, SendResult
from app.service.messages import MessageService
from app.service.queues import QueueService
from tests.concurrency.history import History
from tests.concurrency.workers import ServiceEndpoint, history_in_db, messages_left, run_consumers
from tests.factories import make_queue


async def test_parallel_consumers_receive_each_message_exactly_once(
    queues: QueueService, live: MessageService, db_url: str
) -> None:
    total, consumers = 2000, 8
    name = await make_queue(queues)
    for start in range(0, total, 500):
        results = await live.send(name, [SendEntry(body={"n": n}) for n in range(start, start + 500)])
        assert all(isinstance(r, SendResult) for r in results)
    history = History({(None, n) for n in range(total)}, fifo=False)

    await run_consumers(ServiceEndpoint(live, name), history, consumers, time_limit=40, max_messages=10)

    assert history.problems() == []
    assert len(history.deliveries) == total
    assert len({d.got.sequence_number for d in history.deliveries}) == total
    assert len({d.consumer for d in history.deliveries}) > 1, "one consumer did all the work"
    assert await history_in_db(db_url) == {"acked": (total, total, 1)}
    assert await messages_left(db_url) == 0
